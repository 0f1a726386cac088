package h2grpc

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// recConn is a net.Conn that records each Write; reads block until Close.
type recConn struct {
	mu     sync.Mutex
	writes [][]byte
	closed chan struct{}
	once   sync.Once
}

func (c *recConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.writes = append(c.writes, append([]byte(nil), b...))
	return len(b), nil
}
func (c *recConn) Read([]byte) (int, error)         { <-c.closed; return 0, io.EOF }
func (c *recConn) Close() error                     { c.once.Do(func() { close(c.closed) }); return nil }
func (c *recConn) LocalAddr() net.Addr              { return &net.UnixAddr{Net: "unix"} }
func (c *recConn) RemoteAddr() net.Addr             { return &net.UnixAddr{Net: "unix"} }
func (c *recConn) SetDeadline(time.Time) error      { return nil }
func (c *recConn) SetReadDeadline(time.Time) error  { return nil }
func (c *recConn) SetWriteDeadline(time.Time) error { return nil }

func (c *recConn) take() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

// dataFrame is a DATA frame as frames returns it (the Framer's own is reused).
type dataFrame struct {
	data []byte
	end  bool
}

// frames parses what was written.
func (c *recConn) frames(t *testing.T, w [][]byte) []any {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(bytes.Join(w, nil)))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var out []any
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := f.(*http2.DataFrame); ok {
			out = append(out, dataFrame{append([]byte(nil), d.Data()...), d.StreamEnded()})
			continue
		}
		out = append(out, f)
	}
}

func newTestConn(t *testing.T) *h2conn {
	c := &h2conn{}
	c.init(&recConn{closed: make(chan struct{})}, defaultMaxFrameSize, maxHeaderListSize)
	t.Cleanup(func() { c.nc.Close(); c.w.stop() })
	return c
}

// TestUnaryResponseOneWrite: headers, a message and trailers leave in one Write, as frames
// a peer parses.
func TestUnaryResponseOneWrite(t *testing.T) {
	c := newTestConn(t)
	rc := c.nc.(*recConn)
	s := &streamCore{id: 1}
	c.streams[1] = &ServerStream{}
	c.sendWin, c.peerInitWin = 1<<20, 1<<20
	trl := appendStatusFields(nil, okStatus)
	if err := c.writeMsg(s, &outFrames{hdr: hdrGRPC, msg: []byte("hello"), hasMsg: true, trl: trl, rstAfter: true, now: true}, nil); err != nil {
		t.Fatal(err)
	}
	w := rc.take()
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	fs := rc.frames(t, w)
	if len(fs) != 4 {
		t.Fatalf("%d frames: %v", len(fs), fs)
	}
	h, d, tr, rst := fs[0].(*http2.MetaHeadersFrame), fs[1].(dataFrame), fs[2].(*http2.MetaHeadersFrame), fs[3].(*http2.RSTStreamFrame)
	if h.PseudoValue("status") != "200" || h.StreamEnded() {
		t.Errorf("headers %v", h.Fields)
	}
	if !bytes.Equal(d.data, msgBytes(0, []byte("hello"))) || d.end {
		t.Errorf("data %q", d.data)
	}
	if !tr.StreamEnded() || tr.Fields[0].Value != "0" {
		t.Errorf("trailers %v", tr.Fields)
	}
	if rst.ErrCode != http2.ErrCodeNo {
		t.Errorf("rst %v", rst.ErrCode)
	}
}

// TestWriteSplitsFrames: a message is cut to the peer's frame size and send window, and a
// large header block goes out as HEADERS + CONTINUATION.
func TestWriteSplitsFrames(t *testing.T) {
	c := newTestConn(t)
	rc := c.nc.(*recConn)
	s := &streamCore{id: 3}
	c.streams[3] = &ServerStream{}
	c.sendWin, c.peerInitWin = 1<<20, 1<<20
	big := []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "x-big", Value: string(bytes.Repeat([]byte("v"), 40000))}}
	msg := payload(50000)
	if err := c.writeMsg(s, &outFrames{hdr: big, msg: msg, hasMsg: true, endStream: true, now: true}, nil); err != nil {
		t.Fatal(err)
	}
	var data []byte
	var conts int
	for _, f := range rc.frames(t, rc.take()) {
		switch f := f.(type) {
		case dataFrame:
			if len(f.data) > 16384 {
				t.Errorf("DATA of %d bytes", len(f.data))
			}
			data = append(data, f.data...)
		case *http2.MetaHeadersFrame:
			if len(f.Fields) != 2 || f.Fields[1].Value != big[1].Value {
				t.Error("headers differ")
			}
		}
		conts++
	}
	if !bytes.Equal(data, msgBytes(0, msg)) {
		t.Errorf("data differs: %d bytes", len(data))
	}
	if conts < 5 {
		t.Errorf("%d frames", conts)
	}
}

// TestQueuedControlFrames: frames queued while another goroutine holds the write lock are
// written by that goroutine when it unlocks.
func TestQueuedControlFrames(t *testing.T) {
	c := newTestConn(t)
	rc := c.nc.(*recConn)
	c.w.lock()
	if !c.w.queue(ctlFrame{kind: ctlPingAck, ping: [8]byte{1}}) || !c.w.queue(ctlFrame{kind: ctlRST, streamID: 5, code: http2.ErrCodeCancel}) {
		t.Fatal("queue refused")
	}
	if w := rc.take(); len(w) != 0 {
		t.Fatal("written while locked")
	}
	c.w.unlock(false)
	fs := rc.frames(t, rc.take())
	if len(fs) != 2 {
		t.Fatalf("frames %v", fs)
	}
	if p, ok := fs[0].(*http2.PingFrame); !ok || !p.IsAck() || p.Data[0] != 1 {
		t.Errorf("ping %v", fs[0])
	}
	if r, ok := fs[1].(*http2.RSTStreamFrame); !ok || r.StreamID != 5 {
		t.Errorf("rst %v", fs[1])
	}
}

// TestFlushThenDespiteWaiter: a "now" flush is left to a goroutine waiting for the lock, but
// flushThen flushes itself before f, so that finishDrain's half-close never comes before the
// last response (TestGracefulStop failed that way, when a waiter was slow to take the lock).
func TestFlushThenDespiteWaiter(t *testing.T) {
	c := newTestConn(t)
	rc := c.nc.(*recConn)
	c.w.waiting.Add(1) // a goroutine blocked in lock, as far as the writer can tell
	c.writeWindowUpdate(1, 100, true)
	if w := rc.take(); len(w) != 0 {
		t.Fatal("flushed with a waiter: the test no longer shows the deferred flush")
	}
	var before [][]byte
	c.w.flushThen(func() { before = rc.take() })
	c.w.waiting.Add(-1)
	if fs := rc.frames(t, before); len(fs) != 1 {
		t.Fatalf("%d frames written before f, want the one buffered", len(fs))
	}
}

// TestFlushSoon: a "soon" write is left buffered for the timer, which flushes it; a "now"
// write in between takes it. The timer's function is held until the test has looked, so
// nothing depends on how fast the machine is.
func TestFlushSoon(t *testing.T) {
	c := newTestConn(t)
	rc := c.nc.(*recConn)
	fired, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.w.timer = time.AfterFunc(time.Hour, func() {
		once.Do(func() { close(fired) })
		<-release
		c.w.timerFlush()
	})
	c.w.timer.Stop()
	c.writeWindowUpdate(1, 100, false)
	select {
	case <-fired:
	case <-time.After(20 * time.Second):
		t.Fatal("the flush timer was not armed by a soon write")
	}
	if w := rc.take(); len(w) != 0 {
		t.Fatal("a soon write was flushed before the timer")
	}
	close(release)
	var w [][]byte
	for end := time.Now().Add(20 * time.Second); len(w) == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
		w = rc.take()
	}
	if len(w) != 1 {
		t.Fatalf("%d writes after the timer, want 1", len(w))
	}
	c.writeWindowUpdate(1, 100, false)
	c.writeWindowUpdate(1, 200, true)
	if fs := rc.frames(t, rc.take()); len(fs) != 2 {
		t.Fatalf("%d frames in the now-flush", len(fs))
	}
}

func TestSettingsApplied(t *testing.T) {
	c := newTestConn(t)
	c.streams[1] = &ServerStream{}
	st := c.streams[1].core()
	st.id, st.sendWin, st.winInit = 1, 65535, true
	if err := c.setPeerInitialWindow(100); err != nil {
		t.Fatal(err)
	}
	if st.sendWin != 100 {
		t.Errorf("stream window %d after SETTINGS, want 100", st.sendWin)
	}
	if err := c.setPeerInitialWindow(maxWindow); err != nil {
		t.Fatal(err)
	}
	st.sendWin = maxWindow
	if err := c.setPeerInitialWindow(maxWindow); err != nil {
		t.Fatal(err)
	}
	if err := c.onWindowUpdate(&http2.WindowUpdateFrame{FrameHeader: http2.FrameHeader{StreamID: 1}, Increment: 1}); err == nil {
		t.Error("stream window overflow accepted")
	}
	c.sendWin = maxWindow
	if err := c.onWindowUpdate(&http2.WindowUpdateFrame{Increment: 1}); err == nil {
		t.Error("connection window overflow accepted")
	}
}

// TestVolatileHeadersNotIndexed: a header whose value repeats (:path) is sent as an index the
// second time; one outside indexedHeaders (grpc-timeout, metadata) is sent as a never-indexed
// literal every time, so it never enters (and churns) the dynamic table.
func TestVolatileHeadersNotIndexed(t *testing.T) {
	c := newTestConn(t)
	rc := c.nc.(*recConn)
	blockSize := func(f hpack.HeaderField) int {
		c.w.lock()
		if err := c.w.writeHeadersLocked(1, []hpack.HeaderField{f}, false); err != nil {
			t.Fatal(err)
		}
		c.w.unlock(true)
		return len(bytes.Join(rc.take(), nil))
	}
	path := hpack.HeaderField{Name: ":path", Value: "/csi.v1.Controller/CreateVolume"}
	if first, second := blockSize(path), blockSize(path); second >= first {
		t.Errorf(":path: %d bytes, then %d: not indexed", first, second)
	}
	for _, name := range []string{"grpc-timeout", "x-caller-metadata"} {
		f := hpack.HeaderField{Name: name, Value: "29999813u"}
		if first, second := blockSize(f), blockSize(f); second != first {
			t.Errorf("%s: %d bytes, then %d: indexed", name, first, second)
		}
	}
}
