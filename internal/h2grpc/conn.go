package h2grpc

import (
	"bufio"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const (
	readBufferSize = 32 << 10
	// defaultMaxFrameSize is HTTP/2's SETTINGS_MAX_FRAME_SIZE until a peer announces more:
	// the largest frame a connection reads unless its server is configured otherwise.
	defaultMaxFrameSize = 16384
)

// stream is a server or client stream as the connection's stream table holds it.
type stream interface{ core() *streamCore }

// h2conn is what the server and client sides of a connection share: the frame writer, the
// frame reader, the stream table and both directions of connection-level flow control.
type h2conn struct {
	nc  net.Conn
	w   frameWriter
	br  *bufio.Reader
	rfr *http2.Framer // read side; the reader goroutine only, through hr
	hr  headerReader

	mu          sync.Mutex
	streams     map[uint32]stream
	sendWin     int64 // connection-level send window
	peerInitWin int64 // peer's SETTINGS_INITIAL_WINDOW_SIZE
	winWait     chan struct{}
	dead        bool

	recvAvail, recvUnacked  int64  // connection-level receive window; reader goroutine only
	maxFrame, maxHeaderList uint32 // the largest frame and header list we read (and announce)

	// newStreamLocked, set by the client, gives a stream its id and enters it in the table
	// with the write lock held, so that stream ids go out in increasing order.
	newStreamLocked func(*streamCore) error
}

// init sets the connection up on nc. It reads no frame larger than maxFrame (a larger one
// fails ReadFrame with http2.ErrFrameTooLarge before its payload is buffered, so no read
// buffer ever grows past it) and no header list larger than maxHeaderList.
func (c *h2conn) init(nc net.Conn, maxFrame, maxHeaderList uint32) {
	c.nc = nc
	c.w.init(nc, func(error) { nc.Close() })
	c.br = bufio.NewReaderSize(nc, readBufferSize)
	c.rfr = http2.NewFramer(nil, c.br)
	c.rfr.SetMaxReadFrameSize(maxFrame)
	c.maxFrame, c.maxHeaderList = maxFrame, maxHeaderList
	c.hr.init(c.rfr, maxHeaderList)
	c.rfr.SetReuseFrames()
	c.streams = make(map[uint32]stream)
	c.sendWin, c.peerInitWin = 65535, 65535
	c.recvAvail = connRecvWindow
}

// writePreamble sends the client preface (client side), our SETTINGS and the connection
// WINDOW_UPDATE that opens the receive window to connRecvWindow, and flushes.
func (c *h2conn) writePreamble(client bool, maxStreams uint32) error {
	settings := []http2.Setting{
		{ID: http2.SettingInitialWindowSize, Val: streamRecvWindow},
		{ID: http2.SettingMaxHeaderListSize, Val: c.maxHeaderList},
	}
	if c.maxFrame != defaultMaxFrameSize {
		settings = append(settings, http2.Setting{ID: http2.SettingMaxFrameSize, Val: c.maxFrame})
	}
	if client {
		settings = append(settings, http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	} else {
		settings = append(settings, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams})
	}
	c.w.lock()
	if client {
		c.w.bw.WriteString(http2.ClientPreface)
	}
	if err := c.w.fr.WriteSettings(settings...); err != nil {
		c.w.failLocked(err)
	} else if err := c.w.fr.WriteWindowUpdate(0, connRecvWindow-65535); err != nil {
		c.w.failLocked(err)
	}
	c.w.flushLocked()
	err := c.w.err
	c.w.unlock(true)
	return err
}

// onSettings applies the peer's SETTINGS and queues the ack; the writer applies the frame
// size, header table size and header list size when it writes the ack.
func (c *h2conn) onSettings(f *http2.SettingsFrame, onMaxStreams func(uint32)) error {
	if f.IsAck() {
		return nil
	}
	ack := ctlFrame{kind: ctlSettingsAck}
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			return c.setPeerInitialWindow(s.Val)
		case http2.SettingMaxFrameSize:
			ack.maxFrame = s.Val
		case http2.SettingHeaderTableSize:
			ack.tableSize = min(s.Val, 4096) + 1
		case http2.SettingMaxHeaderListSize:
			ack.maxHeaderList = max(s.Val, 1)
		case http2.SettingMaxConcurrentStreams:
			if onMaxStreams != nil {
				onMaxStreams(s.Val)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !c.w.queue(ack) {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

func (c *h2conn) onPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	if !c.w.queue(ctlFrame{kind: ctlPingAck, ping: f.Data}) {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

// lookup returns the stream with id, or nil.
func (c *h2conn) lookup(id uint32) stream {
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	return st
}

// remove takes s out of the stream table (it can send no more) and reports whether it was
// there, and how many streams remain.
func (c *h2conn) remove(s *streamCore) (bool, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.sendDone = true
	c.kickLocked()
	if st, ok := c.streams[s.id]; ok && st.core() == s {
		delete(c.streams, s.id)
		return true, len(c.streams)
	}
	return false, len(c.streams)
}

// markDead records that the connection is gone, closes it and returns the streams that were
// open (now unable to send); the first call only.
func (c *h2conn) markDead() []stream {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return nil
	}
	c.dead = true
	list := make([]stream, 0, len(c.streams))
	for _, st := range c.streams {
		st.core().sendDone = true
		list = append(list, st)
	}
	clear(c.streams)
	c.kickLocked()
	c.mu.Unlock()
	c.nc.Close()
	c.w.stop()
	return list
}

// queueRST asks for a RST_STREAM from the reader goroutine.
func (c *h2conn) queueRST(id uint32, code http2.ErrCode) bool {
	return c.w.queue(ctlFrame{kind: ctlRST, streamID: id, code: code})
}

// outFrames is what writeMsg sends on a stream, in order.
type outFrames struct {
	hdr       []hpack.HeaderField // HEADERS not ending the stream, or nil
	msg       []byte              // the message (without its prefix), when hasMsg
	hasMsg    bool
	endStream bool                // END_STREAM on the last DATA frame (when trl is nil)
	trl       []hpack.HeaderField // trailing HEADERS with END_STREAM, or nil
	rstAfter  bool                // RST_STREAM(NO_ERROR) after the trailers
	now       bool                // flush now rather than soon
	// ended, when set, is stored true under the write lock once END_STREAM is in the
	// connection's buffer: before the peer can have it, so before any answer to it is read.
	ended *atomic.Bool
	// stallLimit (server streams) bounds how long the write may wait for flow-control window
	// without being granted any; 0: as long as done allows.
	stallLimit time.Duration
}

// writeMsg writes o on stream s, within the send windows and the peer's frame size: when
// the whole message fits in the open windows everything goes out under one lock and one
// flush. It waits for window (flushing first) until done fires (errDone), the stream ends
// (errStreamDone), the connection fails (errConnClosed) or o.stallLimit passes without a
// grant (errWriteStalled); errHeaderListTooLarge when the peer would refuse the headers.
func (c *h2conn) writeMsg(s *streamCore, o *outFrames, done <-chan struct{}) error {
	total := 0
	var pre [msgHeaderLen]byte
	if o.hasMsg {
		total = msgHeaderLen + len(o.msg)
		binary.BigEndian.PutUint32(pre[1:], uint32(len(o.msg)))
	}
	sent := 0
	stall := stallTimer{d: o.stallLimit}
	defer stall.granted()
	for {
		q := 0
		if sent < total {
			var err error
			// Headers are not flow-controlled: a stream without an id yet, or with headers to
			// send, must not wait for window before they are out.
			q, err = c.sendQuota(s, total-sent, done, s.id != 0 && o.hdr == nil, &stall)
			if err != nil {
				return err
			}
		}
		c.w.lock()
		if err := c.checkSendLocked(s); err != nil {
			c.w.unlock(false)
			return err
		}
		endOnHeaders := total == 0 && o.endStream && o.trl == nil
		if o.hdr != nil {
			if err := c.w.writeHeadersLocked(s.id, o.hdr, endOnHeaders); err != nil {
				c.w.unlock(false)
				return c.writeErr(err)
			}
			o.hdr = nil
			s.sentEnd.Store(c.w.offsetLocked())
		} else if endOnHeaders {
			c.w.writeDataLocked(s.id, nil, nil, true) // a half-close without a message
		}
		for q > 0 {
			n := min(q, c.w.maxFrame)
			var a, b []byte
			if sent < msgHeaderLen {
				a = pre[sent:min(msgHeaderLen, sent+n)]
			}
			if end := sent + n - msgHeaderLen; end > 0 {
				b = o.msg[max(sent-msgHeaderLen, 0):end]
			}
			sent += n
			q -= n
			c.w.writeDataLocked(s.id, a, b, sent == total && o.endStream && o.trl == nil)
		}
		if sent < total {
			c.w.unlock(false)
			continue
		}
		if o.ended != nil && o.endStream && o.trl == nil {
			o.ended.Store(true)
		}
		if o.trl != nil {
			if err := c.w.writeHeadersLocked(s.id, o.trl, true); err != nil {
				c.w.unlock(false)
				return c.writeErr(err)
			}
		}
		if o.rstAfter && c.w.err == nil {
			if err := c.w.fr.WriteRSTStream(s.id, http2.ErrCodeNo); err != nil {
				c.w.failLocked(err)
			}
		}
		err := c.w.err
		c.w.unlock(o.now)
		return c.writeErr(err)
	}
}

// checkSendLocked (write lock held) gives a new client stream its id, and refuses to write
// on a stream that ended or a connection that failed.
func (c *h2conn) checkSendLocked(s *streamCore) error {
	if c.w.err != nil {
		return errConnClosed
	}
	if s.id == 0 {
		return c.newStreamLocked(s)
	}
	c.mu.Lock()
	done, dead := s.sendDone, c.dead
	c.mu.Unlock()
	if dead {
		return errConnClosed
	}
	if done {
		return errStreamDone
	}
	return nil
}

func (c *h2conn) writeErr(err error) error {
	if err == nil || err == errHeaderListTooLarge {
		return err
	}
	return errConnClosed
}
