package h2grpc

import (
	"errors"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

const (
	// streamRecvWindow is the SETTINGS_INITIAL_WINDOW_SIZE announced: how much a peer may send
	// on a stream before the receiving side consumed any of it.
	streamRecvWindow = 1 << 20
	// connRecvWindow is the connection-level receive window (raised from the 65535 default
	// with a WINDOW_UPDATE right after the preface). Connection-level credit is returned as
	// soon as the reader has buffered the data, so one slow stream never stalls the others;
	// per-stream memory is bounded by the stream window.
	connRecvWindow = 16 << 20
	// maxWindow is the largest flow-control window HTTP/2 allows.
	maxWindow = 1<<31 - 1
	// maxHeaderListSize is the SETTINGS_MAX_HEADER_LIST_SIZE announced (grpc-go's default).
	maxHeaderListSize = 16 << 20
)

var (
	errConnClosed = errors.New("connection closed")
	errStreamDone = errors.New("stream closed")
	errDone       = errors.New("waiting ended") // the caller's done channel fired
	// errWriteStalled: a write waited for flow-control window longer than its stall limit.
	errWriteStalled = errors.New("the peer opened no flow-control window within the write timeout")
)

// stallTimer bounds how long one write may wait for flow-control window without being
// granted any (ServerConfig.WriteTimeout). Its clock runs only while the write waits, and
// starts again after each grant, so a peer that reads slowly but steadily is not cut off. A
// nil *stallTimer, or one with d <= 0, never fires; the timer is made on the first wait only.
type stallTimer struct {
	d       time.Duration
	t       *time.Timer
	running bool
}

// wait returns the channel that fires when the write has waited d since the last grant.
func (s *stallTimer) wait() <-chan time.Time {
	if s == nil || s.d <= 0 {
		return nil
	}
	switch {
	case s.t == nil:
		s.t = time.NewTimer(s.d)
	case !s.running:
		s.t.Reset(s.d)
	}
	s.running = true
	return s.t.C
}

// granted stops the clock: the peer opened some window.
func (s *stallTimer) granted() {
	if s != nil && s.running {
		s.t.Stop()
		s.running = false
	}
}

// streamCore is what the connection knows of a stream, whichever side it is on.
type streamCore struct {
	id uint32
	// Under h2conn.mu: the send window, and whether the stream may still send. winBase is
	// the peer's initial window the send window was started from (see newStreamLocked).
	sendWin  int64
	winBase  int64
	winInit  bool
	sendDone bool
	rb       recvBuf
	owner    *clientStream // client streams only: the stream table's entry
	// sentEnd is the connection's output offset just past the stream's first frames
	// (frameWriter.offsetLocked): until the connection has accepted that much, the peer
	// cannot have seen the stream.
	sentEnd atomic.Int64
}

// sendQuota takes up to want bytes of send window for s: the minimum of the connection's and
// the stream's windows. When none is open it flushes what is buffered and waits for a
// WINDOW_UPDATE or SETTINGS, unless block is false (then it returns 0). It fails when the
// stream or the connection ends, with errDone when done fires, and with errWriteStalled when
// stall fires first.
func (c *h2conn) sendQuota(s *streamCore, want int, done <-chan struct{}, block bool, stall *stallTimer) (int, error) {
	for {
		c.mu.Lock()
		if c.dead {
			c.mu.Unlock()
			return 0, errConnClosed
		}
		if s.sendDone {
			c.mu.Unlock()
			return 0, errStreamDone
		}
		if !s.winInit {
			s.winInit, s.sendWin, s.winBase = true, c.peerInitWin, c.peerInitWin
		}
		n := min(int64(want), c.sendWin, s.sendWin)
		if n > 0 {
			c.sendWin -= n
			s.sendWin -= n
			c.mu.Unlock()
			stall.granted()
			return int(n), nil
		}
		if !block {
			c.mu.Unlock()
			return 0, nil
		}
		ch := waitFor(&c.winWait)
		c.mu.Unlock()
		c.w.flush()
		select {
		case <-ch:
		case <-done:
			return 0, errDone
		case <-stall.wait():
			return 0, errWriteStalled
		}
	}
}

// kickLocked wakes every goroutine waiting for send window, so it looks again.
func (c *h2conn) kickLocked() { wake(&c.winWait) }

// waitFor returns *wait, made first if not set: the channel the next wake closes. The caller
// holds the lock that guards *wait, and waits on the channel after releasing it.
func waitFor(wait *chan struct{}) <-chan struct{} {
	if *wait == nil {
		*wait = make(chan struct{})
	}
	return *wait
}

// wake closes *wait, if set, which wakes every goroutine waiting on it, and clears it for
// the next ones. The caller holds the lock that guards *wait.
func wake(wait *chan struct{}) {
	if *wait != nil {
		close(*wait)
		*wait = nil
	}
}

// onWindowUpdate applies a WINDOW_UPDATE. An overflow of the connection window is a
// connection error; of a stream window, a stream error (returned as http2.StreamError).
func (c *h2conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if c.sendWin+inc > maxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.sendWin += inc
		c.kickLocked()
		return nil
	}
	st, ok := c.streams[f.StreamID]
	if !ok {
		return nil // a stream that ended: nothing to do
	}
	s := st.core()
	if s.sendWin+inc > maxWindow {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
	}
	s.sendWin += inc
	c.kickLocked()
	return nil
}

// setPeerInitialWindow applies a new SETTINGS_INITIAL_WINDOW_SIZE to every open stream.
func (c *h2conn) setPeerInitialWindow(v uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delta := int64(v) - c.peerInitWin
	c.peerInitWin = int64(v)
	for _, st := range c.streams {
		s := st.core()
		if s.sendWin+delta > maxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		s.sendWin += delta
		s.winBase = int64(v)
	}
	c.kickLocked()
	return nil
}

// onDataFlow accounts a DATA frame of n bytes (padding included) against the connection's
// receive window and queues a connection WINDOW_UPDATE once a quarter of it is used. It is
// called by the reader goroutine only.
func (c *h2conn) onDataFlow(n int) error {
	c.recvAvail -= int64(n)
	if c.recvAvail < 0 {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvUnacked += int64(n)
	if c.recvUnacked >= connRecvWindow/4 {
		if !c.w.queue(ctlFrame{kind: ctlWindowUpdate, n: uint32(c.recvUnacked)}) {
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		c.recvAvail += c.recvUnacked
		c.recvUnacked = 0
	}
	return nil
}

// windowIncrementLocked decides a stream WINDOW_UPDATE: credit must stay a full window ahead of
// what the application consumed, and cover the whole of a message being waited for (msgEnd,
// in stream bytes; 0 when none). Small increments are batched until a quarter of the window,
// unless a waited-for message needs them. It returns the increment to send (0: none).
func (r *recvBuf) windowIncrementLocked(msgEnd int64) int64 {
	if r.eof || r.err != nil {
		return 0
	}
	target := r.consumed + streamRecvWindow
	if msgEnd > target {
		target = msgEnd
	}
	if target-r.received > maxWindow {
		target = r.received + maxWindow
	}
	inc := target - r.credited
	if inc <= 0 || (inc < streamRecvWindow/4 && msgEnd <= r.credited) {
		return 0
	}
	r.credited += inc
	return inc
}
