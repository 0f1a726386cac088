package h2limit

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config is what a Conn holds its client to.
type Config struct {
	// ResetsPerSecond is the client's ResetBudget: past it, the connection ends.
	ResetsPerSecond int
	// WriteTimeout bounds how long an answer may be held back by the client's flow-control
	// window (a stream's, or the connection's); then the connection ends. 0: no bound.
	WriteTimeout time.Duration
	// MaxStreams bounds the streams watched at once (the server's concurrent streams, with
	// room for those whose answer is being written); a stream opened beyond it is not watched
	// for stalls. 0 means 1000.
	MaxStreams int
	// Ended, when set, learns why the Conn ended the connection, once; it must not block.
	Ended func(reason string)
}

// The reasons Conn ends a connection, also sent as the GOAWAY's debug data.
const (
	ReasonTooManyResets = "too_many_resets"
	ReasonWriteTimeout  = "write_timeout"
)

// errEnded is what Read returns once the Conn has ended the connection.
var errEnded = errors.New("h2limit: connection ended by the server's limits")

// Conn watches the HTTP/2 frames a server reads and writes on one connection (the plaintext
// side, after the TLS or peer-credentials handshake) and ends the connection when the client
// breaks Config's rules:
//
//   - it resets streams faster than its ResetBudget allows;
//   - an answer the server has started (response HEADERS written, trailers or RST_STREAM not
//     yet) has found the stream's or the connection's send window closed for WriteTimeout:
//     the client opens no window, so the answer waits in the server's queue for ever. The
//     window is computed from what passes: the client's SETTINGS_INITIAL_WINDOW_SIZE and
//     WINDOW_UPDATEs, less the DATA written.
//
// Ending the connection is a GOAWAY(ENHANCE_YOUR_CALM) with the reason as debug data, written
// when the server's last write ended between two frames (and nothing is being written), then
// a close. The server sees its reads fail and tears the connection down, every stream on it
// included. Read must be called from one goroutine at a time (the server's reader); Write is
// serialized by Conn.
type Conn struct {
	net.Conn
	cfg    Config
	in     frameScanner // the reader's
	resets ResetBudget  // the reader's
	ended  atomic.Bool

	wmu sync.Mutex // held across each Write, and by the GOAWAY that ends the connection
	out frameScanner

	mu        sync.Mutex
	streams   map[uint32]*watchedStream
	maxID     uint32 // highest stream id the client opened
	initWin   int64  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	connWin   int64  // the connection's send window
	answering int    // watched streams with an answer started
	connHeld  time.Time
	timer     *time.Timer
	armed     bool // the timer is running
	closed    bool // the timer is stopped for good
}

// watchedStream is one open stream's send window and answer.
type watchedStream struct {
	credit    int64 // WINDOW_UPDATE increments less DATA written: the window is initWin+credit
	answering bool  // response HEADERS written, the stream not ended
	held      time.Time
}

// NewConn watches nc, a server connection whose handshake is done and whose first bytes to
// read are the client's preface.
func NewConn(nc net.Conn, cfg Config) *Conn {
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 1000
	}
	c := &Conn{Conn: nc, cfg: cfg, resets: NewResetBudget(cfg.ResetsPerSecond),
		streams: map[uint32]*watchedStream{}, initWin: 65535, connWin: 65535}
	c.in.onHeader, c.in.onPayload = c.readHeader, c.readPayload
	c.out.onHeader = c.wroteHeader
	c.in.skipPreface()
	return c
}

// Read reads from the connection and follows the client's frames; once the Conn has ended
// the connection it returns an error.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.scan(p[:n])
	if c.ended.Load() {
		return 0, errEnded
	}
	return n, err
}

// Write writes to the connection and follows the server's frames.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.Conn.Write(p)
	c.out.scan(p[:n])
	return n, err
}

// Close stops the stall timer and closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

// readHeader follows a client frame.
func (c *Conn) readHeader(h frameHeader) int {
	switch h.typ {
	case frameHeaders:
		c.mu.Lock()
		if h.stream%2 == 1 && h.stream > c.maxID {
			c.maxID = h.stream
			if len(c.streams) < c.cfg.MaxStreams {
				c.streams[h.stream] = &watchedStream{}
			}
		}
		c.mu.Unlock()
	case frameRSTStream:
		c.mu.Lock()
		c.forget(h.stream)
		c.mu.Unlock()
		if !c.resets.Spend(time.Now()) {
			c.end(ReasonTooManyResets)
		}
	case frameSettings:
		if h.flags&flagAck == 0 && h.stream == 0 {
			return 6
		}
	case frameWindowUpdate:
		return 4
	}
	return 0
}

// readPayload follows a SETTINGS entry or a WINDOW_UPDATE increment.
func (c *Conn) readPayload(h frameHeader, piece []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch h.typ {
	case frameSettings:
		if binary.BigEndian.Uint16(piece) == settingInitialWindowSize {
			c.initWin = int64(binary.BigEndian.Uint32(piece[2:]))
			for _, s := range c.streams {
				c.recheck(s)
			}
		}
	case frameWindowUpdate:
		inc := int64(binary.BigEndian.Uint32(piece) & 0x7fffffff)
		if h.stream == 0 {
			c.connWin += inc
			c.recheckConn()
		} else if s := c.streams[h.stream]; s != nil {
			s.credit += inc
			c.recheck(s)
		}
	}
}

// wroteHeader follows a server frame; called with wmu held.
func (c *Conn) wroteHeader(h frameHeader) int {
	switch h.typ {
	case frameData:
		c.mu.Lock()
		c.connWin -= int64(h.length)
		if s := c.streams[h.stream]; s != nil {
			s.credit -= int64(h.length)
			c.recheck(s)
		}
		if h.flags&flagEndStream != 0 {
			c.forget(h.stream)
		}
		c.recheckConn()
		c.mu.Unlock()
	case frameHeaders:
		c.mu.Lock()
		if h.flags&flagEndStream != 0 {
			c.forget(h.stream)
		} else if s := c.streams[h.stream]; s != nil && !s.answering {
			s.answering = true
			c.answering++
			c.recheck(s)
			c.recheckConn()
		}
		c.mu.Unlock()
	case frameRSTStream:
		c.mu.Lock()
		c.forget(h.stream)
		c.mu.Unlock()
	}
	return 0
}

// forget stops watching a stream that ended; call it with mu held.
func (c *Conn) forget(id uint32) {
	s := c.streams[id]
	if s == nil {
		return
	}
	delete(c.streams, id)
	if s.answering {
		c.answering--
		c.recheckConn()
	}
}

// recheck notes whether s's answer is held back by its window now; call it with mu held.
func (c *Conn) recheck(s *watchedStream) {
	c.noteHeld(s.answering && c.initWin+s.credit <= 0, &s.held)
}

// recheckConn notes whether the connection's window holds back the answers started; call it
// with mu held.
func (c *Conn) recheckConn() {
	c.noteHeld(c.answering > 0 && c.connWin <= 0, &c.connHeld)
}

// noteHeld starts a hold at now (and the stall timer) when held begins, and clears it when
// held ends; call it with mu held.
func (c *Conn) noteHeld(held bool, since *time.Time) {
	switch {
	case c.cfg.WriteTimeout <= 0:
	case held && since.IsZero():
		*since = time.Now()
		c.arm()
	case !held:
		*since = time.Time{}
	}
}

// arm starts the stall timer for WriteTimeout, unless it is running; call it with mu held.
func (c *Conn) arm() {
	if c.armed || c.closed {
		return
	}
	c.armed = true
	if c.timer == nil {
		c.timer = time.AfterFunc(c.cfg.WriteTimeout, c.checkStalls)
	} else {
		c.timer.Reset(c.cfg.WriteTimeout)
	}
}

// checkStalls, when the stall timer fires, ends the connection if an answer has been held
// back for WriteTimeout, or waits for the oldest hold to reach it.
func (c *Conn) checkStalls() {
	c.mu.Lock()
	oldest := c.connHeld
	for _, s := range c.streams {
		if !s.held.IsZero() && (oldest.IsZero() || s.held.Before(oldest)) {
			oldest = s.held
		}
	}
	if oldest.IsZero() || c.closed {
		c.armed = false
		c.mu.Unlock()
		return
	}
	if wait := c.cfg.WriteTimeout - time.Since(oldest); wait > 0 {
		c.timer.Reset(wait)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.end(ReasonWriteTimeout)
}

// end ends the connection for reason, once: GOAWAY(ENHANCE_YOUR_CALM, reason) if it can be
// written between two of the server's frames without waiting, then the close.
func (c *Conn) end(reason string) {
	if c.ended.Swap(true) {
		return
	}
	if c.cfg.Ended != nil {
		c.cfg.Ended(reason)
	}
	if c.wmu.TryLock() {
		if c.out.atBoundary() {
			c.mu.Lock()
			last := c.maxID
			c.mu.Unlock()
			_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Conn.Write(goAwayFrame(last, errCodeEnhanceYourCalm, reason))
		}
		c.wmu.Unlock()
	}
	_ = c.Close()
}

// errCodeEnhanceYourCalm is HTTP/2's ENHANCE_YOUR_CALM error code.
const errCodeEnhanceYourCalm = 0xb

// goAwayFrame is a whole GOAWAY frame.
func goAwayFrame(lastStream, code uint32, debug string) []byte {
	b := make([]byte, 9+8+len(debug))
	n := 8 + len(debug)
	b[0], b[1], b[2], b[3] = byte(n>>16), byte(n>>8), byte(n), frameGoAway
	binary.BigEndian.PutUint32(b[9:], lastStream&0x7fffffff)
	binary.BigEndian.PutUint32(b[13:], code)
	copy(b[17:], debug)
	return b
}
