package h2grpc

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// dialRaw is a testutil.RawH2 client of the Unix socket at addr.
func dialRaw(t *testing.T, addr string, settings ...http2.Setting) (*testutil.RawH2, *http2.SettingsFrame) {
	t.Helper()
	return testutil.DialRawH2(t, "unix", addr, settings...)
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
			c.Open(1, mUnary)
			c.SendMessage(1, payload(int(limit)-msgHeaderLen))
			c.Until("the echo's trailers", func(f http2.Frame) bool {
				h, ok := f.(*http2.HeadersFrame)
				return ok && h.StreamID == 1 && h.StreamEnded()
			})
			// A DATA header announcing 16 MiB: nothing follows it.
			hdr := []byte{0xff, 0xff, 0xff, byte(http2.FrameData), 0, 0, 0, 0, 3}
			if _, err := c.Conn.Write(hdr); err != nil {
				t.Fatal(err)
			}
			if ga := c.UntilGoAway(); ga.ErrCode != http2.ErrCodeFrameSize {
				t.Errorf("GOAWAY %v, want FRAME_SIZE_ERROR", ga.ErrCode)
			}
			c.Closed()
		})
	}
}

// TestMaxFrameSizeHeaders: a HEADERS frame one byte over the limit ends the connection too.
func TestMaxFrameSizeHeaders(t *testing.T) {
	handled := make(chan struct{}, 1)
	_, addr := startServer(t, ServerConfig{Handler: func(any, grpc.ServerStream) error { handled <- struct{}{}; return nil }})
	c, _ := dialRaw(t, addr)
	block := c.RequestBlock(mUnary, hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("a", 40000)})
	if err := c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:16385], EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if ga := c.UntilGoAway(); ga.ErrCode != http2.ErrCodeFrameSize {
		t.Errorf("GOAWAY %v, want FRAME_SIZE_ERROR", ga.ErrCode)
	}
	c.Closed()
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
	c.Open(1, mUnary, extra...)
	if rst := c.UntilRST(1); rst.ErrCode != http2.ErrCodeFrameSize {
		t.Errorf("RST_STREAM %v, want FRAME_SIZE_ERROR", rst.ErrCode)
	}
	c.Open(3, mUnary, big)
	c.SendMessage(3, []byte("hi"))
	c.Until("stream 3's trailers", func(f http2.Frame) bool {
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
		c.Open(uint32(2*i+1), mUnary)
		<-started
	}
	c.Open(2*limit+1, mUnary)
	if rst := c.UntilRST(2*limit + 1); rst.ErrCode != http2.ErrCodeRefusedStream {
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
		if err := c.Framer.WritePing(false, [8]byte{n}); err != nil {
			t.Fatal(err)
		}
	}
	ack := func(n byte) {
		c.Until("PING ack", func(f http2.Frame) bool {
			p, ok := f.(*http2.PingFrame)
			return ok && p.IsAck() && p.Data[0] == n
		})
	}
	ping(1) // the first: no strike
	ack(1)
	ping(2) // strike 1
	ack(2)
	c.Open(1, mUnary) // the server answers on a stream: the strikes are cleared
	c.SendMessage(1, []byte("hi"))
	c.Until("the echo", func(f http2.Frame) bool { d, ok := f.(*http2.DataFrame); return ok && d.StreamID == 1 })
	for n := byte(3); n <= 5; n++ { // cleared, then strikes 1 and 2
		ping(n)
		ack(n)
	}
	ping(6) // strike 3
	ga := c.UntilGoAway()
	if ga.ErrCode != http2.ErrCodeEnhanceYourCalm || string(ga.DebugData()) != "too_many_pings" {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", ga.ErrCode, ga.DebugData())
	}
	c.Closed()
}

// TestStreamResetBudget: resets within MaxStreamResetsPerSecond leave the connection serving;
// the first one past it gets GOAWAY(ENHANCE_YOUR_CALM, "too_many_resets") and the connection
// ends, against the rapid-reset attack.
func TestStreamResetBudget(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler, MaxStreamResetsPerSecond: 10})
	c, _ := dialRaw(t, addr)
	for i := uint32(0); i < 10; i++ {
		c.Open(2*i+1, mUnary)
		if err := c.Framer.WriteRSTStream(2*i+1, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	c.Open(21, mUnary) // served: ten resets at once are within the budget
	c.SendMessage(21, []byte("hi"))
	c.Until("the echo", func(f http2.Frame) bool { d, ok := f.(*http2.DataFrame); return ok && d.StreamID == 21 })
	// Forty more at once: the budget holds ten at most, however long the echo took.
	for i := uint32(0); i < 40; i++ {
		id := 23 + 2*i
		if c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.RequestBlock(mUnary), EndHeaders: true}) != nil ||
			c.Framer.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the server closed the connection
		}
	}
	ga := c.UntilGoAway()
	if ga.ErrCode != http2.ErrCodeEnhanceYourCalm || string(ga.DebugData()) != "too_many_resets" {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_resets", ga.ErrCode, ga.DebugData())
	}
	c.Closed()
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
	c.Open(1, mUnary)
	if rst := c.UntilRST(1); rst.ErrCode != http2.ErrCodeCancel {
		t.Errorf("RST_STREAM %v, want CANCEL", rst.ErrCode)
	}
	if err := <-recvErr; status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no request message within 50ms") {
		t.Errorf("the handler's RecvMsg: %v, want DeadlineExceeded naming the timeout", err)
	}
	c.Open(3, mUnary)
	c.SendMessage(3, []byte("in time"))
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
	c.Open(1, mUnary)
	c.SendMessage(1, []byte("never read"))
	if rst := c.UntilRST(1); rst.ErrCode != http2.ErrCodeCancel {
		t.Errorf("RST_STREAM %v, want CANCEL", rst.ErrCode)
	}
	if err := <-sendErr; status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no flow-control window within 50ms") {
		t.Errorf("SendMsg: %v, want DeadlineExceeded naming the timeout", err)
	}
}
