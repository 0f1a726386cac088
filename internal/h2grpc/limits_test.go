package h2grpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rawClient is an HTTP/2 client made of x/net's Framer on a Unix socket, for sending what a
// well-behaved client would not. Its connection is closed at the end of the test.
type rawClient struct {
	t   *testing.T
	nc  net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
}

// dialRaw connects to addr, sends the preface and settings, and reads frames until the
// server's SETTINGS, which it returns.
func dialRaw(t *testing.T, addr string, settings ...http2.Setting) (*rawClient, *http2.SettingsFrame) {
	t.Helper()
	nc, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	// Bounds every read of the test: a limit that does not hold fails it instead of hanging.
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	c.fr.SetMaxReadFrameSize(1 << 20)
	c.enc = hpack.NewEncoder(&c.hb)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	for {
		f := c.read()
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			return c, sf
		}
	}
}

func (c *rawClient) read() http2.Frame {
	c.t.Helper()
	f, err := c.fr.ReadFrame()
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	return f
}

// requestBlock is the hpack block of a gRPC request for mUnary, with extra fields.
func (c *rawClient) requestBlock(extra ...hpack.HeaderField) []byte {
	c.hb.Reset()
	for _, f := range append([]hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: mUnary}, {Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}}, extra...) {
		_ = c.enc.WriteField(f)
	}
	return bytes.Clone(c.hb.Bytes())
}

// open starts stream id with the request's headers, without ending it.
func (c *rawClient) open(id uint32, extra ...hpack.HeaderField) {
	c.t.Helper()
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.requestBlock(extra...), EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
}

// sendMessage sends msg as the stream's one message and ends the client's side.
func (c *rawClient) sendMessage(id uint32, msg []byte) {
	c.t.Helper()
	b := make([]byte, msgHeaderLen+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	copy(b[msgHeaderLen:], msg)
	if err := c.fr.WriteData(id, true, b); err != nil {
		c.t.Fatal(err)
	}
}

// until reads frames until one satisfies match, and returns it; it fails the test when the
// connection ends first.
func (c *rawClient) until(what string, match func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return f
		}
	}
}

func (c *rawClient) untilGoAway() *http2.GoAwayFrame {
	c.t.Helper()
	return c.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
}

func (c *rawClient) untilRST(id uint32) *http2.RSTStreamFrame {
	c.t.Helper()
	return c.until("RST_STREAM", func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id
	}).(*http2.RSTStreamFrame)
}

// closed checks that the server closed the connection (after whatever it still sent).
func (c *rawClient) closed() {
	c.t.Helper()
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatalf("the server did not close the connection: %v", err)
			}
			return
		}
	}
}

// TestMaxFrameSize: the server announces its MaxFrameSize, reads frames up to it, and ends
// the connection with FRAME_SIZE_ERROR at the header of a larger one, without waiting for
// (or buffering) its payload. Without the bound, the 16 MiB DATA header below would make it
// wait for 16 MiB that never come, and the test would time out.
func TestMaxFrameSize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      uint32
		announce bool
	}{{"default", 0, false}, {"32 KiB", 32 << 10, true}} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t, ServerConfig{Handler: echoHandler, MaxFrameSize: tc.max})
			limit := max(tc.max, 16384)
			c, sf := dialRaw(t, addr)
			v, ok := sf.Value(http2.SettingMaxFrameSize)
			if ok != tc.announce || ok && v != limit {
				t.Errorf("SETTINGS_MAX_FRAME_SIZE: %d %v, want %d announced: %v", v, ok, limit, tc.announce)
			}
			// A frame of exactly the limit is read: a call whose message fills it works.
			c.open(1)
			c.sendMessage(1, payload(int(limit)-msgHeaderLen))
			c.until("the echo's trailers", func(f http2.Frame) bool {
				h, ok := f.(*http2.HeadersFrame)
				return ok && h.StreamID == 1 && h.StreamEnded()
			})
			// A DATA header announcing 16 MiB: nothing follows it.
			hdr := []byte{0xff, 0xff, 0xff, byte(http2.FrameData), 0, 0, 0, 0, 3}
			if _, err := c.nc.Write(hdr); err != nil {
				t.Fatal(err)
			}
			if ga := c.untilGoAway(); ga.ErrCode != http2.ErrCodeFrameSize {
				t.Errorf("GOAWAY %v, want FRAME_SIZE_ERROR", ga.ErrCode)
			}
			c.closed()
		})
	}
}

// TestMaxFrameSizeHeaders: a HEADERS frame one byte over the limit ends the connection too.
func TestMaxFrameSizeHeaders(t *testing.T) {
	handled := make(chan struct{}, 1)
	_, addr := startServer(t, ServerConfig{Handler: func(any, grpc.ServerStream) error { handled <- struct{}{}; return nil }})
	c, _ := dialRaw(t, addr)
	block := c.requestBlock(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("a", 40000)})
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:16385], EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if ga := c.untilGoAway(); ga.ErrCode != http2.ErrCodeFrameSize {
		t.Errorf("GOAWAY %v, want FRAME_SIZE_ERROR", ga.ErrCode)
	}
	c.closed()
	select {
	case <-handled:
		t.Error("the handler ran")
	default:
	}
}

// TestMaxHeaderListSize: a request whose headers decode to more than MaxHeaderListSize is
// refused (its handler never runs), one within it is served, and the limit is announced.
// The block over the limit is tiny on the wire: one indexed 3000-byte field repeated.
func TestMaxHeaderListSize(t *testing.T) {
	const limit = 16 << 10
	var calls int
	_, addr := startServer(t, ServerConfig{MaxHeaderListSize: limit, Handler: func(_ any, ss grpc.ServerStream) error {
		calls++
		return echoHandler(nil, ss)
	}})
	c, sf := dialRaw(t, addr)
	if v, ok := sf.Value(http2.SettingMaxHeaderListSize); !ok || v != limit {
		t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE %d %v, want %d", v, ok, limit)
	}
	big := hpack.HeaderField{Name: "x-big-bin", Value: strings.Repeat("A", 3000)}
	var extra []hpack.HeaderField
	for range 8 { // 8 × (3000 + 9 + 32) bytes decoded, from a few KiB on the wire
		extra = append(extra, big)
	}
	c.open(1, extra...)
	if rst := c.untilRST(1); rst.ErrCode != http2.ErrCodeFrameSize {
		t.Errorf("RST_STREAM %v, want FRAME_SIZE_ERROR", rst.ErrCode)
	}
	c.open(3, big)
	c.sendMessage(3, []byte("hi"))
	c.until("stream 3's trailers", func(f http2.Frame) bool {
		h, ok := f.(*http2.HeadersFrame)
		return ok && h.StreamID == 3 && h.StreamEnded()
	})
	if calls != 1 {
		t.Errorf("%d handler calls, want 1 (stream 3's)", calls)
	}
}

// TestMaxConcurrentStreams: streams beyond the limit are refused with REFUSED_STREAM while
// the others run.
func TestMaxConcurrentStreams(t *testing.T) {
	const limit = 3
	release := make(chan struct{})
	started := make(chan struct{}, limit+1)
	_, addr := startServer(t, ServerConfig{MaxConcurrentStreams: limit, Handler: func(any, grpc.ServerStream) error {
		started <- struct{}{}
		<-release
		return nil
	}})
	defer close(release)
	c, sf := dialRaw(t, addr)
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != limit {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d %v, want %d", v, ok, limit)
	}
	for i := range limit {
		c.open(uint32(2*i + 1))
		<-started
	}
	c.open(2*limit + 1)
	if rst := c.untilRST(2*limit + 1); rst.ErrCode != http2.ErrCodeRefusedStream {
		t.Errorf("RST_STREAM %v, want REFUSED_STREAM", rst.ErrCode)
	}
}

// TestKeepaliveEnforcement: a client may ping; more than two PINGs closer than
// KeepaliveMinTime get GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings") and the connection ends,
// as on grpc-go. A PING after the server sent a response does not count.
func TestKeepaliveEnforcement(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler, KeepaliveMinTime: time.Hour})
	c, _ := dialRaw(t, addr)
	ping := func(n byte) {
		if err := c.fr.WritePing(false, [8]byte{n}); err != nil {
			t.Fatal(err)
		}
	}
	ack := func(n byte) {
		c.until("PING ack", func(f http2.Frame) bool {
			p, ok := f.(*http2.PingFrame)
			return ok && p.IsAck() && p.Data[0] == n
		})
	}
	ping(1) // the first: no strike
	ack(1)
	ping(2) // strike 1
	ack(2)
	c.open(1) // the server answers on a stream: the strikes are cleared
	c.sendMessage(1, []byte("hi"))
	c.until("the echo", func(f http2.Frame) bool { d, ok := f.(*http2.DataFrame); return ok && d.StreamID == 1 })
	for n := byte(3); n <= 5; n++ { // cleared, then strikes 1 and 2
		ping(n)
		ack(n)
	}
	ping(6) // strike 3
	ga := c.untilGoAway()
	if ga.ErrCode != http2.ErrCodeEnhanceYourCalm || string(ga.DebugData()) != "too_many_pings" {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", ga.ErrCode, ga.DebugData())
	}
	c.closed()
}

// TestFirstMessageTimeout: a call whose client sends headers and never a message is reset
// after FirstMessageTimeout, and its handler, waiting in RecvMsg, returns DeadlineExceeded.
// A call whose message comes in time is served. Without the bound the handler would wait
// until the client goes away.
func TestFirstMessageTimeout(t *testing.T) {
	recvErr := make(chan error, 2)
	_, addr := startServer(t, ServerConfig{FirstMessageTimeout: 50 * time.Millisecond, Handler: func(_ any, ss grpc.ServerStream) error {
		var f frame
		err := ss.RecvMsg(&f)
		recvErr <- err
		if err != nil {
			return err
		}
		return ss.SendMsg(&f)
	}})
	c, _ := dialRaw(t, addr)
	c.open(1)
	if rst := c.untilRST(1); rst.ErrCode != http2.ErrCodeCancel {
		t.Errorf("RST_STREAM %v, want CANCEL", rst.ErrCode)
	}
	if err := <-recvErr; status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no request message within 50ms") {
		t.Errorf("the handler's RecvMsg: %v, want DeadlineExceeded naming the timeout", err)
	}
	c.open(3)
	c.sendMessage(3, []byte("in time"))
	if err := <-recvErr; err != nil {
		t.Errorf("a message in time: %v", err)
	}
}

// TestWriteTimeout: a client that never opens its receive window (initial window 0) holds
// a handler's SendMsg for WriteTimeout only: then SendMsg fails with DeadlineExceeded and the
// stream is reset. Without the bound the handler would block until the client goes away.
func TestWriteTimeout(t *testing.T) {
	sendErr := make(chan error, 1)
	_, addr := startServer(t, ServerConfig{WriteTimeout: 50 * time.Millisecond, Handler: func(_ any, ss grpc.ServerStream) error {
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		err := ss.SendMsg(&f)
		sendErr <- err
		return err
	}})
	c, _ := dialRaw(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.open(1)
	c.sendMessage(1, []byte("never read"))
	if rst := c.untilRST(1); rst.ErrCode != http2.ErrCodeCancel {
		t.Errorf("RST_STREAM %v, want CANCEL", rst.ErrCode)
	}
	if err := <-sendErr; status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no flow-control window within 50ms") {
		t.Errorf("SendMsg: %v, want DeadlineExceeded naming the timeout", err)
	}
}
