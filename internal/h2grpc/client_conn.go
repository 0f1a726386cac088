package h2grpc

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// maxStreamID is the last client stream id; a connection that reaches it drains.
const maxStreamID = 1<<31 - 1

// errRetry: the connection cannot take the stream (it drains or died) before anything of the
// stream was written; the call moves to another connection.
var errRetry = errors.New("connection unusable before the stream was written")

// clientTransport is one client connection. Its reader goroutine (readLoop) completes the
// calls; callers write under the connection's write lock.
type clientTransport struct {
	h2conn
	cc   *ClientConn
	peer peer.Peer

	nextID uint32 // under the write lock

	// Under h2conn.mu: the server's SETTINGS_MAX_CONCURRENT_STREAMS and the streams holding
	// a slot of it (reserved before their headers are written).
	maxStreams uint32
	active     uint32
	slotWait   chan struct{}

	draining atomic.Bool // GOAWAY received, or stream ids exhausted
	gone     atomic.Bool // the connection failed
}

func newClientTransport(cc *ClientConn, nc net.Conn, auth credentials.AuthInfo) *clientTransport {
	ct := &clientTransport{cc: cc, nextID: 1, maxStreams: math.MaxUint32}
	ct.init(nc, defaultMaxFrameSize, maxHeaderListSize)
	ct.peer = peer.Peer{Addr: nc.RemoteAddr(), LocalAddr: nc.LocalAddr(), AuthInfo: auth}
	ct.newStreamLocked = ct.registerLocked
	return ct
}

func (ct *clientTransport) usable() bool { return !ct.draining.Load() && !ct.gone.Load() }

// handshake sends the preface and reads the server's SETTINGS (the caller bounds it with a
// read deadline).
func (ct *clientTransport) handshake() error {
	if err := ct.writePreamble(true, 0); err != nil {
		return err
	}
	f, err := ct.hr.readFrame()
	if err != nil {
		return fmt.Errorf("reading the server preface: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fmt.Errorf("the server preface is not a SETTINGS frame but %v", f.Header().Type)
	}
	return ct.onSettings(sf, ct.setMaxStreams)
}

func (ct *clientTransport) setMaxStreams(n uint32) {
	ct.mu.Lock()
	ct.maxStreams = n
	ct.signalSlotsLocked()
	ct.mu.Unlock()
}

func (ct *clientTransport) signalSlotsLocked() { wake(&ct.slotWait) }

// reserveSlot waits, within done, for the stream count to be under the server's limit.
func (ct *clientTransport) reserveSlot(cs *clientStream, done <-chan struct{}) error {
	ct.mu.Lock()
	for {
		if ct.dead || ct.draining.Load() {
			ct.mu.Unlock()
			return errRetry
		}
		if ct.active < ct.maxStreams {
			ct.active++
			cs.slot = true
			ct.mu.Unlock()
			return nil
		}
		ch := waitFor(&ct.slotWait)
		ct.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return errDone
		}
		ct.mu.Lock()
	}
}

// releaseLocked takes cs out of the stream table and gives its slot back; it reports whether
// cs was in the table. A draining connection closes with its last stream.
func (ct *clientTransport) releaseLocked(cs *clientStream) bool {
	cs.s.sendDone = true
	ct.kickLocked()
	in := false
	if cs.s.id != 0 {
		if st, ok := ct.streams[cs.s.id]; ok && st == cs {
			delete(ct.streams, cs.s.id)
			in = true
		}
	}
	if cs.slot {
		cs.slot = false
		ct.active--
		ct.signalSlotsLocked()
	}
	if ct.draining.Load() && len(ct.streams) == 0 && ct.active == 0 {
		ct.nc.Close() // the reader goroutine sees it and cleans up
	}
	return in
}

func (ct *clientTransport) release(cs *clientStream) bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.releaseLocked(cs)
}

// registerLocked (write lock held) gives cs.s its stream id and enters it in the table.
func (ct *clientTransport) registerLocked(s *streamCore) error {
	cs := s.owner
	if ct.nextID > maxStreamID {
		ct.draining.Store(true)
		return errRetry
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.dead {
		return errRetry
	}
	if ct.draining.Load() {
		return errRetry
	}
	s.id = ct.nextID
	ct.nextID += 2
	if s.winInit {
		s.sendWin += ct.peerInitWin - s.winBase
	} else {
		s.winInit, s.sendWin = true, ct.peerInitWin
	}
	s.winBase = ct.peerInitWin
	ct.streams[s.id] = cs
	return nil
}

// readLoop reads frames until the connection ends, then fails the calls still open.
func (ct *clientTransport) readLoop() {
	defer ct.cc.wg.Done()
	err := ct.readFrames()
	ct.gone.Store(true)
	ct.cc.forget(ct)
	msg := "error reading from server: " + err.Error()
	for _, st := range ct.markDead() {
		cs := st.(*clientStream)
		cs.s.rb.abort(status.Error(codes.Unavailable, msg))
	}
	ct.mu.Lock()
	ct.active = 0
	ct.signalSlotsLocked()
	ct.mu.Unlock()
}

func (ct *clientTransport) readFrames() error {
	err := readFrames(&ct.hr, ct.handle, func(_ http2.Frame, se http2.StreamError) {
		ct.resetStream(se.StreamID, se.Code, status.Errorf(codes.Internal, "stream error: %v", se))
	})
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		ct.w.queue(ctlFrame{kind: ctlGoAway, code: http2.ErrCode(ce)})
	}
	return err
}

func (ct *clientTransport) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if cs := ct.stream(f.StreamID); cs != nil {
			cs.onHeaders(f)
		}
	case *http2.DataFrame:
		if err := ct.onDataFlow(int(f.Length)); err != nil {
			return err
		}
		cs := ct.stream(f.StreamID)
		if cs == nil {
			return nil
		}
		if code := cs.s.rb.push(f.Data(), int(f.Length), false); code != http2.ErrCodeNo {
			return http2.StreamError{StreamID: f.StreamID, Code: code}
		}
		if f.StreamEnded() {
			ct.resetStream(f.StreamID, http2.ErrCodeNo, status.Error(codes.Internal, "server closed the stream without sending trailers"))
		}
	case *http2.RSTStreamFrame:
		cs := ct.stream(f.StreamID)
		if cs == nil {
			return nil
		}
		if f.ErrCode == http2.ErrCodeRefusedStream {
			cs.unprocessedEnd(status.Error(codes.Unavailable, "the server refused the stream (REFUSED_STREAM)"))
			return nil
		}
		code := rstStreamCode(f.ErrCode)
		if code == codes.Canceled {
			// A server cancels at the deadline it was given; when ours passed too, say so
			// (as grpc-go does).
			if dl, ok := cs.ctx.Deadline(); ok && !dl.After(time.Now()) {
				code = codes.DeadlineExceeded
			}
		}
		cs.s.rb.abort(status.Errorf(code, "stream terminated by RST_STREAM with error code: %v", f.ErrCode))
		ct.release(cs)
	case *http2.SettingsFrame:
		return ct.onSettings(f, ct.setMaxStreams)
	case *http2.PingFrame:
		return ct.onPing(f)
	case *http2.WindowUpdateFrame:
		return ct.onWindowUpdate(f)
	case *http2.GoAwayFrame:
		ct.onGoAway(f)
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol) // we announced ENABLE_PUSH 0
	}
	return nil
}

func (ct *clientTransport) stream(id uint32) *clientStream {
	if st := ct.lookup(id); st != nil {
		return st.(*clientStream)
	}
	return nil
}

// resetStream ends a stream with err and sends RST_STREAM(code).
func (ct *clientTransport) resetStream(id uint32, code http2.ErrCode, err error) {
	if cs := ct.stream(id); cs != nil {
		ct.release(cs) // first: the caller woken by abort must not reset it a second time
		cs.s.rb.abort(err)
	}
	ct.queueRST(id, code)
}

// onGoAway makes the connection take no new stream; the streams the server will not process
// (ids above the last one) fail with Unavailable, as never sent, so they may be retried.
func (ct *clientTransport) onGoAway(f *http2.GoAwayFrame) {
	ct.draining.Store(true)
	ct.cc.forget(ct)
	ct.mu.Lock()
	var refused []*clientStream
	for id, st := range ct.streams {
		if id > f.LastStreamID {
			refused = append(refused, st.(*clientStream))
		}
	}
	idle := len(ct.streams) == len(refused) && ct.active == uint32(len(refused))
	ct.signalSlotsLocked()
	ct.mu.Unlock()
	for _, cs := range refused {
		cs.unprocessedEnd(status.Errorf(codes.Unavailable, "the connection is draining (GOAWAY %v)", f.ErrCode))
	}
	if idle {
		ct.nc.Close()
	}
}
