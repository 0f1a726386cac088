package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// callStats is a stats handler that counts connections the HTTP/2 layer began and passes on
// each call's end (its handler returned) with its error.
type callStats struct {
	connBegins atomic.Int32
	ends       chan error
}

func newCallStats() *callStats { return &callStats{ends: make(chan error, 100)} }

func (s *callStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (s *callStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (s *callStats) HandleConn(_ context.Context, cs stats.ConnStats) {
	if _, ok := cs.(*stats.ConnBegin); ok {
		s.connBegins.Add(1)
	}
}
func (s *callStats) HandleRPC(_ context.Context, rs stats.RPCStats) {
	if e, ok := rs.(*stats.End); ok {
		select {
		case s.ends <- e.Error:
		default:
		}
	}
}

// nextEnd waits (at most 20 s) for a call's handler to return, and returns its error.
func (s *callStats) nextEnd(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.ends:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("no call's handler returned")
		return nil
	}
}

// startLimitsHarness serves opts on transport with limits and a callStats.
func startLimitsHarness(t *testing.T, transport Transport, limits TransportLimits, fake *serverFake) (*serverHarness, *callStats) {
	t.Helper()
	cs := newCallStats()
	opts := serverFakeOptions(fake)
	opts.Transport, opts.Limits, opts.StatsHandlers = transport, limits, []stats.Handler{cs}
	return startServerHarness(t, transport, opts, ListenerPolicy{}, slog.LevelInfo), cs
}

// TestFirstMessageTimeout: a call whose client sends its headers and never its message ends
// after firstMessageTimeout on both transports, and its handler returns; the caller's stream
// is ended (RST_STREAM, or trailers with DEADLINE_EXCEEDED). A connection that never sends
// the HTTP/2 preface is closed after it too.
func TestFirstMessageTimeout(t *testing.T) {
	onEachTransport(t, func(t *testing.T, transport Transport) {
		fake := &serverFake{}
		ts, cs := startLimitsHarness(t, transport, TransportLimits{FirstMessageTimeout: 50 * time.Millisecond}, fake)
		c, _ := testutil.DialRawH2(t, "unix", ts.sock)
		c.Open(1, "/csi.v1.Identity/Probe")
		c.UntilEnd(1)
		if err := cs.nextEnd(t); status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled {
			t.Errorf("the handler returned %v, want DEADLINE_EXCEEDED or CANCELED", err)
		}
		if n := len(fake.recorded()); n != 0 {
			t.Errorf("the backend was called %d times", n)
		}
		// A message in time is served.
		c.Open(3, "/csi.v1.Identity/Probe")
		c.SendMessage(3, nil)
		if err := cs.nextEnd(t); err != nil {
			t.Errorf("a call in time: %v", err)
		}
		// A connection that never sends its preface is closed as soon.
		silent, err := net.Dial("unix", ts.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		_ = silent.SetReadDeadline(time.Now().Add(20 * time.Second))
		for err == nil {
			_, err = silent.Read(make([]byte, 256)) // the server's SETTINGS, then the close
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a silent connection: %v, want it closed", err)
		}
	})
}

// TestWriteTimeout: a client that never opens its receive window holds the handler of a
// large answer for writeTimeout only, on both transports. Without the bound the frames
// transport's handler would wait in SendMsg until the client goes away; grpc-go's takes a
// call's first message whatever the window (so a unary handler returns at once) and blocks
// from the second, which TestCallGuardWriteTimeout shows bounded.
func TestWriteTimeout(t *testing.T) {
	big, err := proto.Marshal(&csi.GetPluginInfoResponse{Name: "fake", VendorVersion: "1",
		Manifest: map[string]string{"pad": strings.Repeat("x", 256<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	onEachTransport(t, func(t *testing.T, transport Transport) {
		fake := &serverFake{answer: func(context.Context, string, []byte) ([]byte, error) { return big, nil }}
		ts, cs := startLimitsHarness(t, transport, TransportLimits{WriteTimeout: 50 * time.Millisecond}, fake)
		c, _ := testutil.DialRawH2(t, "unix", ts.sock, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		c.Open(1, "/csi.v1.Identity/GetPluginInfo")
		c.SendMessage(1, nil)
		err := cs.nextEnd(t)
		if transport == TransportFrames && status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("the handler returned %v, want DEADLINE_EXCEEDED", err)
		}
	})
}

// TestWriteTimeoutSmallAnswer: an answer small enough to be queued whole (so no SendMsg waits
// and the handler returns at once) to a client that opens no window is ended after
// writeTimeout too: on frames its stream is reset; on grpc, where grpc-go keeps the answer
// queued until the connection closes, the connection ends (GOAWAY ENHANCE_YOUR_CALM
// write_timeout, or closed).
func TestWriteTimeoutSmallAnswer(t *testing.T) {
	onEachTransport(t, func(t *testing.T, transport Transport) {
		ts, _ := startLimitsHarness(t, transport, TransportLimits{WriteTimeout: 50 * time.Millisecond}, &serverFake{})
		c, _ := testutil.DialRawH2(t, "unix", ts.sock, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		c.Open(1, "/csi.v1.Identity/Probe")
		c.SendMessage(1, nil)
		end := c.Until("the end of stream 1 or of the connection", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				return f.StreamID == 1
			case *http2.GoAwayFrame:
				return true
			}
			return false
		})
		if g, ok := end.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeEnhanceYourCalm || string(g.DebugData()) != "write_timeout" {
				t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM write_timeout", g.ErrCode, g.DebugData())
			}
			c.Closed()
		}
	})
}

// TestStreamResetRate: a client that opens calls and resets each at once (rapid reset) loses
// its connection on both transports once past maxStreamResetsPerSecond, with GOAWAY
// ENHANCE_YOUR_CALM too_many_resets; the same number of resets within the budget does not.
func TestStreamResetRate(t *testing.T) {
	onEachTransport(t, func(t *testing.T, transport Transport) {
		ts, _ := startLimitsHarness(t, transport, TransportLimits{MaxStreamResetsPerSecond: 20}, &serverFake{})
		within, _ := testutil.DialRawH2(t, "unix", ts.sock)
		for i := uint32(0); i < 20; i++ {
			within.Open(2*i+1, "/csi.v1.Identity/Probe")
			if err := within.Framer.WriteRSTStream(2*i+1, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
		}
		// A whole call after the resets is answered: the connection is still up.
		within.Open(41, "/csi.v1.Identity/Probe")
		within.SendMessage(41, nil)
		if _, ok := within.UntilEnd(41).(*http2.HeadersFrame); !ok {
			t.Error("a call after 20 resets on a budget of 20 was not answered")
		}

		c, _ := testutil.DialRawH2(t, "unix", ts.sock)
		for i := uint32(0); i < 1000; i++ {
			id := 2*i + 1
			if c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.RequestBlock("/csi.v1.Identity/Probe"), EndHeaders: true}) != nil ||
				c.Framer.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				break // the gateway closed the connection
			}
		}
		g := c.Ended("1000 resets at once on a budget of 20")
		if g != nil && (g.ErrCode != http2.ErrCodeEnhanceYourCalm || string(g.DebugData()) != "too_many_resets") {
			t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_resets", g.ErrCode, g.DebugData())
		}
	})
}

// TestFrameLimits: the frame-level limits hold on both transports: the settings announced,
// a DATA header of 16 MiB ends the connection with FRAME_SIZE_ERROR before its payload is
// read, a header list over maxHeaderListSize is refused, and a ping flood gets GOAWAY
// ENHANCE_YOUR_CALM.
func TestFrameLimits(t *testing.T) {
	limits := TransportLimits{MaxHeaderListSize: 8 << 10, MaxConcurrentStreams: 7, KeepaliveMinTime: time.Hour}
	onEachTransport(t, func(t *testing.T, transport Transport) {
		fake := &serverFake{}
		ts, _ := startLimitsHarness(t, transport, limits, fake)

		c, sf := testutil.DialRawH2(t, "unix", ts.sock)
		for id, want := range map[http2.SettingID]uint32{http2.SettingMaxConcurrentStreams: 7, http2.SettingMaxHeaderListSize: 8 << 10} {
			if v, ok := sf.Value(id); !ok || v != want {
				t.Errorf("%v: %d %v, want %d", id, v, ok, want)
			}
		}
		if v, ok := sf.Value(http2.SettingMaxFrameSize); ok && v != 16384 {
			t.Errorf("SETTINGS_MAX_FRAME_SIZE %d, want 16384", v)
		}
		var pad []hpack.HeaderField
		for range 4 {
			pad = append(pad, hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("p", 3000)})
		}
		c.Open(1, "/csi.v1.Identity/Probe", pad...)
		c.SendMessage(1, nil)
		if end, ok := c.UntilEnd(1).(*http2.RSTStreamFrame); !ok {
			t.Errorf("a header list over the limit: %v, want RST_STREAM", end)
		}
		if n := len(fake.recorded()); n != 0 {
			t.Errorf("the backend was called %d times", n)
		}
		if _, err := c.Conn.Write([]byte{0xff, 0xff, 0xff, byte(http2.FrameData), 0, 0, 0, 0, 3}); err != nil {
			t.Fatal(err)
		}
		// The connection ends (grpc-go closes it without a GOAWAY).
		if ga := c.Ended("a 16 MiB DATA header"); ga != nil && ga.ErrCode != http2.ErrCodeFrameSize {
			t.Errorf("a 16 MiB DATA header: GOAWAY %v, want FRAME_SIZE_ERROR", ga.ErrCode)
		}

		c, _ = testutil.DialRawH2(t, "unix", ts.sock)
		for n := range 10 {
			if err := c.Framer.WritePing(false, [8]byte{byte(n)}); err != nil {
				break // the server may have closed already
			}
		}
		if ga := c.UntilGoAway(); ga.ErrCode != http2.ErrCodeEnhanceYourCalm || string(ga.DebugData()) != "too_many_pings" {
			t.Errorf("a ping flood: GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", ga.ErrCode, ga.DebugData())
		}
	})
}

func TestTransportLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limits    TransportLimits
		transport Transport
		want      string
	}{
		{"defaults", TransportLimits{}, TransportGRPC, ""},
		{"frames may read larger frames", TransportLimits{MaxFrameSize: 1 << 20}, TransportFrames, ""},
		{"grpc-go may not", TransportLimits{MaxFrameSize: 1 << 20}, TransportGRPC, "limits.maxFrameSize: grpc-go's server reads frames of 16384 bytes at most"},
		{"below HTTP/2's minimum", TransportLimits{MaxFrameSize: 1000}, TransportFrames, "limits.maxFrameSize: 1000 is not between 16384 and 16777215"},
		{"above HTTP/2's maximum", TransportLimits{MaxFrameSize: 1 << 24}, TransportFrames, "limits.maxFrameSize: 16777216 is not between"},
		{"tiny header list", TransportLimits{MaxHeaderListSize: 100}, TransportFrames, "limits.maxHeaderListSize: 100 is below 4096"},
		{"negative connections", TransportLimits{MaxConnections: -1}, TransportFrames, "limits.maxConnections: -1 is negative"},
		{"negative first message", TransportLimits{FirstMessageTimeout: -time.Second}, TransportFrames, "limits.firstMessageTimeout: -1s is negative"},
		{"negative write", TransportLimits{WriteTimeout: -time.Second}, TransportFrames, "limits.writeTimeout: -1s is negative"},
		{"negative keepalive", TransportLimits{KeepaliveMinTime: -time.Second}, TransportFrames, "limits.keepaliveMinTime: -1s is negative"},
		{"negative reset rate", TransportLimits{MaxStreamResetsPerSecond: -1}, TransportGRPC, "limits.maxStreamResetsPerSecond: -1 is negative"},
	} {
		err := tc.limits.Validate(tc.transport)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if d := (TransportLimits{}).withDefaults(); d != DefaultTransportLimits {
		t.Errorf("zero limits take %+v, want the defaults %+v", d, DefaultTransportLimits)
	}
}

// TestKeepaliveMinTime: PINGs spaced more widely than keepaliveMinTime are answered and the
// connection stays, on both transports, with no call in flight (grpc-go's own default, 5
// minutes and 2 hours without calls, would end it after the third). Each PING is sent 200 ms
// after the previous one's ack, so the server reads them at least that far apart.
func TestKeepaliveMinTime(t *testing.T) {
	onEachTransport(t, func(t *testing.T, transport Transport) {
		ts, _ := startLimitsHarness(t, transport, TransportLimits{KeepaliveMinTime: 10 * time.Millisecond}, &serverFake{})
		c, _ := testutil.DialRawH2(t, "unix", ts.sock)
		for n := range 5 {
			if err := c.Framer.WritePing(false, [8]byte{byte(n)}); err != nil {
				t.Fatal(err)
			}
			f := c.Until("the PING's ack or a GOAWAY", func(f http2.Frame) bool {
				switch f := f.(type) {
				case *http2.PingFrame:
					return f.IsAck() && f.Data[0] == byte(n)
				case *http2.GoAwayFrame:
					return true
				}
				return false
			})
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("PING %d: GOAWAY %v %q", n, ga.ErrCode, ga.DebugData())
			}
			time.Sleep(200 * time.Millisecond)
		}
		c.Open(1, "/csi.v1.Identity/Probe")
		c.SendMessage(1, nil)
		if end, ok := c.UntilEnd(1).(*http2.HeadersFrame); !ok {
			t.Errorf("a call after the pings: %v, want its trailers", end)
		}
	})
}
