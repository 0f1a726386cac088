package h2grpc

import (
	"encoding/binary"
	"io"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// msgHeaderLen is the gRPC message prefix: a compressed flag and a big-endian length.
const msgHeaderLen = 5

// recvBuf holds what the reader goroutine received on a stream until the application reads
// it as messages. Messages may span many DATA frames and one frame may hold many messages.
type recvBuf struct {
	mu   sync.Mutex
	buf  []byte // buf[off:] not yet read
	off  int
	eof  bool  // END_STREAM seen
	err  error // the stream ended abnormally (reset, connection lost, cancelled)
	wait chan struct{}
	// Stream-level receive flow control, in bytes since the stream began: received from the
	// peer (padding included), credited to it (initial window + updates), and consumed by
	// the application (plus padding, consumed at once).
	received, credited, consumed int64
	// firstTimer (server streams with ServerConfig.FirstMessageTimeout) fires when the first
	// message is late; nil once it arrived, the client ended its side or the stream ended.
	firstTimer *time.Timer
}

func (r *recvBuf) init() { r.credited = streamRecvWindow }

// push appends a DATA frame's payload (frameLen counts padding too) and marks END_STREAM. It
// returns the stream error to send when the peer overran the window it was given or sent
// after END_STREAM, and 0 (NO_ERROR) otherwise.
func (r *recvBuf) push(data []byte, frameLen int, end bool) http2.ErrCode {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.eof {
		return http2.ErrCodeStreamClosed
	}
	r.received += int64(frameLen)
	if r.received > r.credited {
		return http2.ErrCodeFlowControl
	}
	r.consumed += int64(frameLen - len(data))
	// Only append: the application may still be decoding the last message it was given,
	// which lies before len(r.buf); readMsg compacts when it is done with it.
	r.buf = append(r.buf, data...)
	if end {
		r.eof = true
	}
	if r.firstTimer != nil && (end || firstMessageIn(r.buf)) {
		r.stopFirstTimerLocked()
	}
	r.signalLocked()
	return http2.ErrCodeNo
}

// firstMessageIn reports whether buf, a stream's data from its start, holds a whole message.
func firstMessageIn(buf []byte) bool {
	return len(buf) >= msgHeaderLen && uint64(len(buf)) >= msgHeaderLen+uint64(binary.BigEndian.Uint32(buf[1:msgHeaderLen]))
}

func (r *recvBuf) stopFirstTimerLocked() {
	if r.firstTimer != nil {
		r.firstTimer.Stop()
		r.firstTimer = nil
	}
}

// setEOF marks END_STREAM carried by a HEADERS frame (trailers).
func (r *recvBuf) setEOF() {
	r.mu.Lock()
	r.eof = true
	r.stopFirstTimerLocked()
	r.signalLocked()
	r.mu.Unlock()
}

// abort ends the stream with err (the first error wins) and wakes the reader of the stream.
func (r *recvBuf) abort(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.stopFirstTimerLocked()
	r.signalLocked()
	r.mu.Unlock()
}

func (r *recvBuf) signalLocked() { wake(&r.wait) }

// waitLocked releases r.mu until the next push, EOF or abort, or until done fires (then it
// returns false); it holds r.mu again when it returns.
func (r *recvBuf) waitLocked(done <-chan struct{}) bool {
	ch := waitFor(&r.wait)
	r.mu.Unlock()
	select {
	case <-ch:
		r.mu.Lock()
		return true
	case <-done:
		r.mu.Lock()
		return false
	}
}

// readMsg returns the next message of s: its payload (valid until the next call) and whether
// its compressed flag is set. It returns io.EOF after the last message of a stream that ended
// cleanly, io.ErrUnexpectedEOF when it ended inside a message, the stream's abort error, a
// ResourceExhausted status for a message larger than maxSize, or errDone when done fires. It
// sends the stream's WINDOW_UPDATEs, and flushes this connection's pending writes before it
// waits.
func (c *h2conn) readMsg(s *streamCore, maxSize int, done <-chan struct{}) ([]byte, bool, error) {
	r := &s.rb
	flushed := false
	r.mu.Lock()
	// The previous message is decoded by now: reclaim its space.
	if r.off > 0 && r.off >= len(r.buf)-r.off {
		n := copy(r.buf, r.buf[r.off:])
		r.buf, r.off = r.buf[:n], 0
	}
	for {
		var msgEnd int64
		if avail := len(r.buf) - r.off; avail >= msgHeaderLen {
			h := r.buf[r.off:]
			flag, n := h[0], binary.BigEndian.Uint32(h[1:msgHeaderLen])
			if flag > 1 {
				r.mu.Unlock()
				return nil, false, status.Errorf(codes.Internal, "grpc: received unexpected payload format %d", flag)
			}
			if uint64(n) > uint64(maxSize) {
				r.mu.Unlock()
				return nil, false, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, maxSize)
			}
			if size := msgHeaderLen + int(n); avail >= size {
				msg := h[msgHeaderLen:size:size]
				r.off += size
				r.consumed += int64(size)
				inc := r.windowIncrementLocked(0)
				r.mu.Unlock()
				if inc > 0 {
					c.writeWindowUpdate(s.id, uint32(inc), false)
				}
				return msg, flag == 1, nil
			}
			msgEnd = r.consumed + msgHeaderLen + int64(n)
		}
		if r.err != nil {
			err := r.err
			r.mu.Unlock()
			return nil, false, err
		}
		if r.eof {
			empty := r.off == len(r.buf)
			r.mu.Unlock()
			if empty {
				return nil, false, io.EOF
			}
			return nil, false, io.ErrUnexpectedEOF
		}
		if inc := r.windowIncrementLocked(msgEnd); inc > 0 {
			r.mu.Unlock()
			c.writeWindowUpdate(s.id, uint32(inc), true)
			r.mu.Lock()
			continue
		}
		if !flushed {
			r.mu.Unlock()
			c.w.flush()
			r.mu.Lock()
			flushed = true
			continue
		}
		if !r.waitLocked(done) {
			r.mu.Unlock()
			return nil, false, errDone
		}
	}
}

// writeWindowUpdate sends a stream WINDOW_UPDATE from an application goroutine.
func (c *h2conn) writeWindowUpdate(id uint32, n uint32, now bool) {
	c.w.lock()
	if c.w.err == nil {
		if err := c.w.fr.WriteWindowUpdate(id, n); err != nil {
			c.w.failLocked(err)
		}
	}
	c.w.unlock(now)
}

// payloadBytes returns a marshalled message as one slice: the buffer itself when there is
// one (the usual case), a copy otherwise.
func payloadBytes(bs mem.BufferSlice) []byte {
	switch len(bs) {
	case 0:
		return nil
	case 1:
		return bs[0].ReadOnlyData()
	}
	return bs.Materialize()
}
