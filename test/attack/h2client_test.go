package attack

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// This file is the attacker's side: a raw HTTP/2 client built on x/net's Framer and hpack, so
// a case can send what no well-behaved client sends, and a record of everything the gateway
// answered, so a case can say exactly what the attacker got.

// rawConn is one attacker connection. Writes go through a buffer that the case flushes; one
// goroutine reads the gateway's frames into answers (ACKing its SETTINGS and PINGs, as any
// client must, with the case's next write when the case is writing, and never sending a
// WINDOW_UPDATE).
type rawConn struct {
	conn net.Conn

	wmu sync.Mutex // guards w, fr's writes and enc
	w   *bufio.Writer
	fr  *http2.Framer
	enc *hpack.Encoder
	eb  bytes.Buffer

	mu      sync.Mutex
	changed *sync.Cond
	ans     answers
	replies [][]byte // ACKs the reader could not write: the next write sends them
}

// answers is what the gateway sent on one connection.
type answers struct {
	frames   int                      // every frame read
	settings bool                     // the gateway's first SETTINGS arrived
	goaway   *http2.ErrCode           // the GOAWAY's code, if one arrived
	rst      map[uint32]http2.ErrCode // RST_STREAM codes by stream
	ended    map[uint32]string        // streams the gateway ended with END_STREAM: their grpc-status or :status
	readErr  error                    // why reading stopped (EOF, reset, TLS alert): the connection is gone
}

// done reports whether stream id was reset or ended by the gateway, or the whole connection
// was ended (GOAWAY or closed).
func (a *answers) done(id uint32) bool {
	if a.goaway != nil || a.readErr != nil {
		return true
	}
	_, r := a.rst[id]
	_, e := a.ended[id]
	return r || e
}

// connEnded reports whether the gateway ended the connection (GOAWAY, or closed it).
func (a *answers) connEnded() bool { return a.goaway != nil || a.readErr != nil }

// refusedStreams counts the streams reset with REFUSED_STREAM.
func (a *answers) refusedStreams() int {
	n := 0
	for _, c := range a.rst {
		if c == http2.ErrCodeRefusedStream {
			n++
		}
	}
	return n
}

// String says what the attacker got, for the case's report.
func (a *answers) String() string {
	var parts []string
	if a.goaway != nil {
		parts = append(parts, "GOAWAY "+a.goaway.String())
	}
	if len(a.rst) > 0 {
		byCode := map[http2.ErrCode]int{}
		for _, c := range a.rst {
			byCode[c]++
		}
		var codes []string
		for c, n := range byCode {
			codes = append(codes, fmt.Sprintf("%d×%s", n, c))
		}
		sort.Strings(codes)
		parts = append(parts, "RST_STREAM "+strings.Join(codes, ", "))
	}
	if len(a.ended) > 0 {
		byStatus := map[string]int{}
		for _, s := range a.ended {
			byStatus[s]++
		}
		var st []string
		for s, n := range byStatus {
			st = append(st, fmt.Sprintf("%d×%s", n, s))
		}
		sort.Strings(st)
		parts = append(parts, "answers "+strings.Join(st, ", "))
	}
	if a.readErr != nil {
		parts = append(parts, "connection ended: "+a.readErr.Error())
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing")
	}
	return fmt.Sprintf("%s (%d frames read)", strings.Join(parts, "; "), a.frames)
}

// attackerTarget is where an attacker connects: a Unix socket path, or a TLS address with the
// client configuration to present.
type attackerTarget struct {
	unix string
	addr string
	tls  *tls.Config
}

func (t attackerTarget) String() string {
	if t.unix != "" {
		return "unix " + t.unix
	}
	return "tls " + t.addr
}

// dialRaw connects to target, sends the client preface and a SETTINGS frame with settings,
// and starts reading. A TLS connection negotiates h2 by ALPN. The connection is closed by
// close (the case's cleanup does it).
func dialRaw(target attackerTarget, settings ...http2.Setting) (*rawConn, error) {
	var c net.Conn
	var err error
	if target.unix != "" {
		c, err = net.DialTimeout("unix", target.unix, 10*time.Second)
	} else {
		cfg := target.tls.Clone()
		cfg.NextProtos = []string{"h2"}
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", target.addr, cfg)
	}
	if err != nil {
		return nil, err
	}
	rc := &rawConn{conn: c, w: bufio.NewWriterSize(c, 64<<10)}
	rc.changed = sync.NewCond(&rc.mu)
	rc.ans.rst = map[uint32]http2.ErrCode{}
	rc.ans.ended = map[uint32]string{}
	rc.fr = http2.NewFramer(rc.w, c)
	rc.fr.AllowIllegalWrites = true
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.fr.MaxHeaderListSize = 1 << 20
	rc.enc = hpack.NewEncoder(&rc.eb)
	if _, err := rc.w.WriteString(http2.ClientPreface); err != nil {
		c.Close()
		return nil, err
	}
	if err := rc.fr.WriteSettings(settings...); err != nil {
		c.Close()
		return nil, err
	}
	if err := rc.flush(); err != nil {
		c.Close()
		return nil, err
	}
	go rc.read()
	return rc, nil
}

// read records every frame the gateway sends until the connection ends.
func (rc *rawConn) read() {
	for {
		f, err := rc.fr.ReadFrame()
		rc.mu.Lock()
		if err != nil {
			rc.ans.readErr = err
			rc.mu.Unlock()
			rc.changed.Broadcast()
			return
		}
		rc.ans.frames++
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				rc.ans.settings = true
				rc.replies = append(rc.replies, frameHeader(0, http2.FrameSettings, http2.FlagSettingsAck, 0))
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				rc.replies = append(rc.replies, append(frameHeader(8, http2.FramePing, http2.FlagPingAck, 0), f.Data[:]...))
			}
		case *http2.GoAwayFrame:
			code := f.ErrCode
			rc.ans.goaway = &code
		case *http2.RSTStreamFrame:
			rc.ans.rst[f.StreamID] = f.ErrCode
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				s := ":status " + f.PseudoValue("status")
				for _, h := range f.RegularFields() {
					if h.Name == "grpc-status" {
						s = "grpc-status " + h.Value
					}
				}
				rc.ans.ended[f.StreamID] = s
			}
		}
		reply := len(rc.replies) > 0
		rc.mu.Unlock()
		rc.changed.Broadcast()
		// The reader never waits for the write lock: a case's write can be blocked on a
		// gateway that has stopped reading until it can write, which waits for this reader.
		// Nor does it flush unless it has an ACK to send: the flush writes the case's
		// buffered frames too, and would block this reader on a gateway that waits for it
		// to read (a stream flood: the gateway writing its REFUSED_STREAMs, the reader
		// writing the next HEADERS), until both sides' write deadlines.
		if reply && rc.wmu.TryLock() {
			if rc.writeReplies() == nil {
				rc.w.Flush()
			}
			rc.wmu.Unlock()
		}
	}
}

// writeReplies buffers the ACKs the reader queued; call it with the write lock held.
func (rc *rawConn) writeReplies() error {
	rc.mu.Lock()
	replies := rc.replies
	rc.replies = nil
	rc.mu.Unlock()
	for _, r := range replies {
		if _, err := rc.w.Write(r); err != nil {
			return err
		}
	}
	return nil
}

// waitFor waits up to timeout for cond to hold over the answers so far and reports whether it
// did. It wakes on every frame and at the deadline.
func (rc *rawConn) waitFor(timeout time.Duration, cond func(*answers) bool) bool {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, func() {
		rc.mu.Lock() // so the wake-up cannot fall between a waiter's check and its Wait
		rc.changed.Broadcast()
		rc.mu.Unlock()
	})
	defer t.Stop()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for !cond(&rc.ans) {
		if !time.Now().Before(deadline) {
			return false
		}
		rc.changed.Wait()
	}
	return true
}

// answers returns a copy of what the gateway sent so far.
func (rc *rawConn) answers() answers {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	a := rc.ans
	a.rst = make(map[uint32]http2.ErrCode, len(rc.ans.rst))
	for k, v := range rc.ans.rst {
		a.rst[k] = v
	}
	a.ended = make(map[uint32]string, len(rc.ans.ended))
	for k, v := range rc.ans.ended {
		a.ended[k] = v
	}
	return a
}

// write runs fn with the write lock held (fn uses rc.fr, rc.w or rc.enc), under a write
// deadline so that a gateway that stops reading cannot hang the case.
func (rc *rawConn) write(fn func() error) error {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	rc.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := rc.writeReplies(); err != nil {
		return err
	}
	return fn()
}

// flush writes what is buffered.
func (rc *rawConn) flush() error {
	return rc.write(rc.w.Flush)
}

// close closes the connection; the reader then stops.
func (rc *rawConn) close() { rc.conn.Close() }

// callHeaders returns the request headers of a gRPC call to method, followed by extra fields.
func callHeaders(method string, extra ...hpack.HeaderField) []hpack.HeaderField {
	return append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	}, extra...)
}

// encode hpack-encodes fields with the connection's encoder; call it with the write lock held
// (the encoder's dynamic table must follow the order in which blocks are sent).
func (rc *rawConn) encode(fields []hpack.HeaderField) []byte {
	rc.eb.Reset()
	for _, f := range fields {
		rc.enc.WriteField(f)
	}
	return bytes.Clone(rc.eb.Bytes())
}

// writeHeaders buffers a HEADERS frame (END_HEADERS set) opening stream id with fields.
func (rc *rawConn) writeHeaders(id uint32, endStream bool, fields []hpack.HeaderField) error {
	return rc.write(func() error {
		return rc.fr.WriteHeaders(http2.HeadersFrameParam{
			StreamID: id, BlockFragment: rc.encode(fields), EndHeaders: true, EndStream: endStream,
		})
	})
}

// emptyMessage is a gRPC message frame carrying an empty protobuf message (Probe's request).
var emptyMessage = []byte{0, 0, 0, 0, 0}

// writeProbe buffers a whole Identity/Probe call on stream id: HEADERS, then the empty request
// with END_STREAM.
func (rc *rawConn) writeProbe(id uint32) error {
	if err := rc.writeHeaders(id, false, callHeaders(probeMethod)); err != nil {
		return err
	}
	return rc.write(func() error { return rc.fr.WriteData(id, true, emptyMessage) })
}

// writeRaw buffers bytes as they are: a frame the Framer would refuse to build.
func (rc *rawConn) writeRaw(b []byte) error {
	return rc.write(func() error { _, err := rc.w.Write(b); return err })
}

// frameHeader is the 9-byte header of an HTTP/2 frame announcing length bytes of payload.
func frameHeader(length uint32, typ http2.FrameType, flags http2.Flags, stream uint32) []byte {
	return []byte{
		byte(length >> 16), byte(length >> 8), byte(length),
		byte(typ), byte(flags),
		byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream),
	}
}

// errConnEnded tells an attack loop that the gateway ended the connection, which is what the
// attack waits for.
var errConnEnded = errors.New("the gateway ended the connection")

// stillOpen returns errConnEnded once the gateway has ended the connection.
func (rc *rawConn) stillOpen() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.ans.connEnded() {
		return errConnEnded
	}
	return nil
}
