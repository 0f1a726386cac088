package h2grpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const (
	// writeBufferSize is the bufio.Writer of a connection: a unary call's frames fit many
	// times over, so they leave in one write.
	writeBufferSize = 32 << 10
	// flushDelay bounds how long a "flush soon" write (a server's message, a client stream's
	// headers) waits for the next write to the same connection before it is flushed alone.
	flushDelay = 50 * time.Microsecond
	// maxQueuedControl caps the control frames the reader queued and no writer sent yet; a
	// peer that outruns it (a PING flood on a stalled connection) loses the connection.
	maxQueuedControl = 4096
)

var errHeaderListTooLarge = errors.New("header list size exceeds the peer's SETTINGS_MAX_HEADER_LIST_SIZE")

type ctlKind uint8

const (
	ctlSettingsAck ctlKind = iota
	ctlPingAck
	ctlRST
	ctlWindowUpdate
	ctlHeaders
	ctlGoAway
)

// ctlFrame is a frame the reader goroutine asks to send. The reader never waits for the write
// lock: whoever holds it (or the reader itself, when the lock is free) writes the queue.
type ctlFrame struct {
	kind     ctlKind
	streamID uint32
	code     http2.ErrCode
	n        uint32 // window increment
	ping     [8]byte
	hf       []hpack.HeaderField
	end      bool // ctlHeaders: END_STREAM; then RST_STREAM(code) too when code != 0... see rstAfter
	rstAfter bool
	debug    string // ctlGoAway: the debug data
	// A SETTINGS ack first applies the peer's settings that concern the writer.
	maxFrame, tableSize, maxHeaderList uint32
}

// frameWriter is a connection's write side: one bufio.Writer, one Framer writing into it and
// one hpack encoder, all under mu. Writes are flushed "now" (the caller is about to wait for
// the peer) or "soon" (a timer flushes unless another write flushes first); a writer that
// sees another goroutine waiting for mu leaves the flush to it, so concurrent calls share
// write syscalls. The first write error is sticky and calls onFail, which closes the
// connection.
type frameWriter struct {
	mu                sync.Mutex
	bw                *bufio.Writer
	fr                *http2.Framer
	enc               *hpack.Encoder
	hbuf              bytes.Buffer
	err               error
	maxFrame          int    // peer's SETTINGS_MAX_FRAME_SIZE
	peerMaxHeaderList uint64 // 0: no limit announced
	urgent            bool   // a "now" flush was left to a waiting writer
	timerArmed        bool
	timer             *time.Timer
	dhdr              [9]byte
	waiting           atomic.Int32 // goroutines blocked in lock
	buffered          atomic.Bool  // bytes left in bw at the last unlock
	sentStream        atomic.Bool  // HEADERS or DATA written since the server's last PING check
	onFail            func(error)
	out               countingWriter // under bw: what the connection accepted

	ctlMu    sync.Mutex
	ctl      []ctlFrame
	ctlSpare []ctlFrame
	hasCtl   atomic.Bool
}

func (w *frameWriter) init(nc net.Conn, onFail func(error)) {
	w.out.w = nc
	w.bw = bufio.NewWriterSize(&w.out, writeBufferSize)
	w.fr = http2.NewFramer(w.bw, nil)
	w.enc = hpack.NewEncoder(&w.hbuf)
	w.maxFrame = 16384 // the HTTP/2 default, until the peer says otherwise
	w.onFail = onFail
	w.timer = time.AfterFunc(time.Hour, w.timerFlush)
	w.timer.Stop()
}

// indexedHeaders are the headers whose values repeat from call to call, so the hpack encoder
// keeps them in its dynamic table and sends an index the next time. Every other header
// (grpc-timeout, trace context, a status message, the caller's metadata) is sent as a
// literal that is never indexed: their values are new on most calls, and entering each in
// the table only evicts the useful entries — at a cost that profiles showed as a tenth of
// the gateway's CPU.
var indexedHeaders = map[string]bool{
	":method": true, ":scheme": true, ":path": true, ":authority": true, ":status": true,
	"content-type": true, "te": true, "user-agent": true, "grpc-status": true,
	"grpc-encoding": true, "grpc-accept-encoding": true,
}

// countingWriter counts the bytes its writer accepted.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// offsetLocked (write lock held) is where the next byte written goes in the connection's
// output: compared with accepted, it tells whether bytes written so far left the process.
func (w *frameWriter) offsetLocked() int64 { return w.out.n.Load() + int64(w.bw.Buffered()) }

// accepted is how many bytes the connection has accepted so far.
func (w *frameWriter) accepted() int64 { return w.out.n.Load() }

// lock takes the write lock, counting the caller as waiting meanwhile.
func (w *frameWriter) lock() {
	w.waiting.Add(1)
	w.mu.Lock()
	w.waiting.Add(-1)
}

// unlock writes the queued control frames, flushes (now, or soon by arming the timer) and
// releases the lock; it loops while frames were queued by a reader that found the lock held.
func (w *frameWriter) unlock(now bool) {
	for {
		if w.drainCtlLocked() {
			now = true
		}
		if w.err == nil && w.bw.Buffered() > 0 {
			switch {
			case now || w.urgent:
				if w.waiting.Load() > 0 {
					w.urgent = true // the next holder flushes
				} else {
					w.flushLocked()
				}
			case !w.timerArmed:
				w.timerArmed = true
				w.timer.Reset(flushDelay)
			}
		}
		w.buffered.Store(w.err == nil && w.bw.Buffered() > 0)
		w.mu.Unlock()
		if !w.hasCtl.Load() || !w.mu.TryLock() {
			return
		}
	}
}

func (w *frameWriter) flushLocked() {
	w.urgent = false
	if w.timerArmed {
		w.timerArmed = false
		w.timer.Stop()
	}
	if err := w.bw.Flush(); err != nil {
		w.failLocked(err)
	}
}

// flush sends whatever is buffered; callers use it before they wait for the peer. It does
// not take the lock when nothing is buffered.
func (w *frameWriter) flush() {
	if !w.buffered.Load() && !w.hasCtl.Load() {
		return
	}
	w.lock()
	w.unlock(true)
}

// flushThen writes the queued control frames and flushes everything buffered itself, even
// when another goroutine waits for the lock (flush would leave it to that one), then calls f
// under the lock: nothing written before f can be left for after it. finishDrain half-closes
// the connection in f.
func (w *frameWriter) flushThen(f func()) {
	w.lock()
	w.drainCtlLocked()
	if w.err == nil && w.bw.Buffered() > 0 {
		w.flushLocked()
	}
	f()
	w.unlock(false)
}

func (w *frameWriter) timerFlush() {
	w.lock()
	w.timerArmed = false
	w.unlock(true)
}

// stop disarms the flush timer for good (the connection is closed).
func (w *frameWriter) stop() {
	w.lock()
	w.timer.Stop()
	w.timerArmed = true // never re-armed
	w.mu.Unlock()
}

func (w *frameWriter) failLocked(err error) {
	if w.err == nil {
		w.err = err
		if w.onFail != nil {
			w.onFail(err)
		}
	}
}

// queue asks for a control frame from the reader goroutine without waiting for the write
// lock. It returns false when too many are queued already.
func (w *frameWriter) queue(c ctlFrame) bool {
	w.ctlMu.Lock()
	if len(w.ctl) >= maxQueuedControl {
		w.ctlMu.Unlock()
		return false
	}
	w.ctl = append(w.ctl, c)
	w.hasCtl.Store(true)
	w.ctlMu.Unlock()
	if w.mu.TryLock() {
		w.unlock(true)
	}
	return true
}

func (w *frameWriter) drainCtlLocked() bool {
	if !w.hasCtl.Load() {
		return false
	}
	w.ctlMu.Lock()
	q := w.ctl
	w.ctl = w.ctlSpare[:0]
	w.hasCtl.Store(false)
	w.ctlMu.Unlock()
	for i := range q {
		w.writeCtlLocked(&q[i])
		q[i] = ctlFrame{}
	}
	w.ctlSpare = q[:0]
	return len(q) > 0
}

func (w *frameWriter) writeCtlLocked(c *ctlFrame) {
	if w.err != nil {
		return
	}
	var err error
	switch c.kind {
	case ctlSettingsAck:
		if c.maxFrame != 0 {
			w.maxFrame = int(c.maxFrame)
		}
		if c.tableSize != 0 {
			w.enc.SetMaxDynamicTableSizeLimit(c.tableSize - 1) // stored +1 so that 0 is "unset"
		}
		if c.maxHeaderList != 0 {
			w.peerMaxHeaderList = uint64(c.maxHeaderList)
		}
		err = w.fr.WriteSettingsAck()
	case ctlPingAck:
		err = w.fr.WritePing(true, c.ping)
	case ctlRST:
		err = w.fr.WriteRSTStream(c.streamID, c.code)
	case ctlWindowUpdate:
		err = w.fr.WriteWindowUpdate(c.streamID, c.n)
	case ctlGoAway:
		err = w.fr.WriteGoAway(c.streamID, c.code, []byte(c.debug))
	case ctlHeaders:
		if err = w.writeHeadersLocked(c.streamID, c.hf, c.end); err == errHeaderListTooLarge {
			err = w.fr.WriteRSTStream(c.streamID, http2.ErrCodeInternal)
		} else if err == nil && c.rstAfter {
			err = w.fr.WriteRSTStream(c.streamID, http2.ErrCodeNo)
		}
	}
	if err != nil {
		w.failLocked(err)
	}
}

// writeHeadersLocked hpack-encodes hf into one HEADERS frame and as many CONTINUATION frames
// as the peer's frame size needs. It refuses (writing nothing) a list larger than the peer's
// SETTINGS_MAX_HEADER_LIST_SIZE with errHeaderListTooLarge.
func (w *frameWriter) writeHeadersLocked(id uint32, hf []hpack.HeaderField, end bool) error {
	if w.err != nil {
		return w.err
	}
	if w.peerMaxHeaderList != 0 && headerListSize(hf) > w.peerMaxHeaderList {
		return errHeaderListTooLarge
	}
	w.hbuf.Reset()
	for _, f := range hf {
		f.Sensitive = f.Sensitive || !indexedHeaders[f.Name]
		_ = w.enc.WriteField(f) // writes to a bytes.Buffer: cannot fail
	}
	block := w.hbuf.Bytes()
	w.markSent()
	first := true
	for first || len(block) > 0 {
		chunk := block
		if len(chunk) > w.maxFrame {
			chunk = chunk[:w.maxFrame]
		}
		block = block[len(chunk):]
		var err error
		if first {
			first = false
			err = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: chunk, EndStream: end, EndHeaders: len(block) == 0})
		} else {
			err = w.fr.WriteContinuation(id, len(block) == 0, chunk)
		}
		if err != nil {
			w.failLocked(err)
			return err
		}
	}
	return nil
}

// markSent records that HEADERS or DATA went out, for keepalive enforcement; it writes the
// shared flag only when it changes.
func (w *frameWriter) markSent() {
	if !w.sentStream.Load() {
		w.sentStream.Store(true)
	}
}

// writeDataLocked writes one DATA frame whose payload is a followed by b (a gRPC message
// prefix and a slice of the message), without copying them together first.
func (w *frameWriter) writeDataLocked(id uint32, a, b []byte, end bool) error {
	if w.err != nil {
		return w.err
	}
	n := len(a) + len(b)
	w.markSent()
	h := w.dhdr[:]
	h[0], h[1], h[2] = byte(n>>16), byte(n>>8), byte(n)
	h[3] = byte(http2.FrameData)
	h[4] = 0
	if end {
		h[4] = byte(http2.FlagDataEndStream)
	}
	h[5], h[6], h[7], h[8] = byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
	w.bw.Write(h)
	w.bw.Write(a)
	if _, err := w.bw.Write(b); err != nil {
		w.failLocked(err)
		return err
	}
	return nil
}
