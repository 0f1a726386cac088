package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// TestServerStreamContext checks what a handler finds in its context, against what grpc-go
// puts there: incoming metadata without the transport's headers but with :authority and
// user-agent, the peer, the method, and the ServerTransportStream.
func TestServerStreamContext(t *testing.T) {
	type seen struct {
		md     metadata.MD
		peer   *peer.Peer
		method string
		ok     bool
	}
	got := make(chan seen, 1)
	_, addr := startServer(t, ServerConfig{Handler: func(_ any, ss grpc.ServerStream) error {
		var s seen
		s.md, _ = metadata.FromIncomingContext(ss.Context())
		s.peer, _ = peer.FromContext(ss.Context())
		s.method, s.ok = grpc.Method(ss.Context())
		got <- s
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		return ss.SendMsg(&f)
	}})
	cc := grpcClient(t, addr, grpc.WithUserAgent("agent/1"))
	ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, 5*time.Second), "k", "v")
	if err := cc.Invoke(ctx, "/svc/M", &frame{b: []byte("x")}, &frame{}); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.method != "/svc/M" || !s.ok {
		t.Errorf("grpc.Method = %q, %v", s.method, s.ok)
	}
	if s.peer == nil || s.peer.Addr == nil || s.peer.LocalAddr == nil || s.peer.AuthInfo == nil {
		t.Errorf("peer = %+v", s.peer)
	}
	for _, k := range []string{":authority", "user-agent", "k", "content-type"} {
		if len(s.md[k]) != 1 {
			t.Errorf("md[%q] = %q, want one value (md %v)", k, s.md[k], s.md)
		}
	}
	if ua := s.md["user-agent"]; len(ua) == 1 && !strings.HasPrefix(ua[0], "agent/1") {
		t.Errorf("user-agent = %q", ua)
	}
	for _, k := range []string{":path", ":method", "te", "grpc-timeout", ":scheme"} {
		if _, ok := s.md[k]; ok {
			t.Errorf("md has reserved %q: %v", k, s.md)
		}
	}
}

// TestGracefulStop: a call in flight finishes, new calls fail Unavailable, GracefulStop and
// Serve return, and nothing is left running.
func TestGracefulStop(t *testing.T) {
	checkGoroutines(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	l := unixListener(t)
	s := NewServer(ServerConfig{Creds: insecure.NewCredentials(), Codec: rawCodec{}, Workers: 2,
		Handler: func(_ any, ss grpc.ServerStream) error {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				return err
			}
			if string(f.b) == "wait" {
				started <- struct{}{}
				<-release
			}
			return ss.SendMsg(&f)
		}})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	cc := grpcClient(t, l.Addr().String())

	inflight := make(chan error, 1)
	go func() { inflight <- cc.Invoke(context.Background(), "/s/m", &frame{b: []byte("wait")}, &frame{}) }()
	<-started
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	// New calls fail once the listener is closed and GOAWAY arrived.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := cc.Invoke(ctx, "/s/m", &frame{b: []byte("new")}, &frame{})
		cancel()
		if status.Code(err) == codes.Unavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new call during GracefulStop: %v, want Unavailable", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	default:
	}
	close(release)
	if err := <-inflight; err != nil {
		t.Errorf("call in flight: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("GracefulStop did not return")
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	cc.Close()
}

// TestStop: handlers' contexts are cancelled, clients see Unavailable, nothing is left.
func TestStop(t *testing.T) {
	checkGoroutines(t)
	ctxErr := make(chan error, 1)
	l := unixListener(t)
	s := NewServer(ServerConfig{Creds: insecure.NewCredentials(), Codec: rawCodec{},
		Handler: func(_ any, ss grpc.ServerStream) error {
			if err := ss.SendHeader(nil); err != nil {
				return err
			}
			<-ss.Context().Done()
			ctxErr <- ss.Context().Err()
			return ss.Context().Err()
		}})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	cc := grpcClient(t, l.Addr().String())
	cs, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, "/s/m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Header(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := <-ctxErr; !errors.Is(err, context.Canceled) {
		t.Errorf("handler context: %v", err)
	}
	if err := cs.RecvMsg(&frame{}); status.Code(err) != codes.Unavailable {
		t.Errorf("client: %v, want Unavailable", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if err := s.Serve(unixListener(t)); err != ErrServerStopped {
		t.Errorf("Serve after Stop: %v", err)
	}
	cc.Close()
}

// TestSmallWindows: 5 MiB both ways with a grpc-go client announcing 64 KiB windows.
func TestSmallWindows(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler, MaxRecvMsgSize: testMaxMsg})
	cc := grpcClient(t, addr, grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(testMaxMsg)))
	want := payload(5 << 20)
	var got frame
	if err := cc.Invoke(ctxTimeout(t, 20*time.Second), mUnary, &frame{b: want}, &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.b, want) {
		t.Fatal("echo differs")
	}
}

// TestBadRequests sends non-gRPC requests with net/http's HTTP/2 client (unencrypted, with
// prior knowledge): the answers are grpc-go's (HTTP status and grpc-status in one
// trailers-only response).
func TestBadRequests(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler})
	tr := &http.Transport{Protocols: new(http.Protocols), DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", addr)
	}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	cases := []struct {
		name, method, ct string
		wantHTTP         int
		wantGRPC         string
	}{
		{"not gRPC", "POST", "text/plain", 415, "3"},
		{"GET", "GET", "application/grpc", 405, "13"},
		{"gRPC", "POST", "application/grpc", 200, "12"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, "http://x/test.Echo/Nope", bytes.NewReader([]byte{0, 0, 0, 0, 0}))
			req.Header.Set("content-type", c.ct)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			st := resp.Header.Get("grpc-status") + resp.Trailer.Get("grpc-status")
			if resp.StatusCode != c.wantHTTP || st != c.wantGRPC {
				t.Errorf("HTTP %d grpc-status %q, want %d %q", resp.StatusCode, st, c.wantHTTP, c.wantGRPC)
			}
		})
	}
}

// TestOtel: otelgrpc's handlers work unchanged on both h2grpc sides and on a grpc-go client:
// one server span per call, child of the client's span.
func TestOtel(t *testing.T) {
	for _, client := range []string{"grpc-go", "h2grpc"} {
		t.Run(client, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			opts := []otelgrpc.Option{otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{})}
			_, addr := startServer(t, ServerConfig{Handler: echoHandler, StatsHandlers: []stats.Handler{otelgrpc.NewServerHandler(opts...)}})
			var cc grpc.ClientConnInterface
			if client == "grpc-go" {
				cc = grpcClient(t, addr, grpc.WithStatsHandler(otelgrpc.NewClientHandler(opts...)))
			} else {
				cc = newTestClient(t, addr, ClientConfig{StatsHandlers: []stats.Handler{otelgrpc.NewClientHandler(opts...)}})
			}
			const calls = 3
			for range calls {
				if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("x")}, &frame{}); err != nil {
					t.Fatal(err)
				}
			}
			err := cc.Invoke(ctxTimeout(t, 5*time.Second), "/test.Echo/Missing", &frame{b: []byte("x")}, &frame{})
			if status.Code(err) != codes.Unimplemented {
				t.Fatalf("missing method: %v", err)
			}
			// The server ends its span after the trailers are out: wait for the last one.
			for end := time.Now().Add(5 * time.Second); len(rec.Ended()) < 2*(calls+1) && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
			var servers, clients []sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				switch s.SpanKind() {
				case trace.SpanKindServer:
					servers = append(servers, s)
				case trace.SpanKindClient:
					clients = append(clients, s)
				}
			}
			if len(servers) != calls+1 || len(clients) != calls+1 {
				t.Fatalf("%d server spans, %d client spans, want %d each", len(servers), len(clients), calls+1)
			}
			byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
			for _, c := range clients {
				byID[c.SpanContext().SpanID()] = c
			}
			for _, s := range servers {
				c, ok := byID[s.Parent().SpanID()]
				if !ok || c.SpanContext().TraceID() != s.SpanContext().TraceID() {
					t.Errorf("server span %q has no client parent", s.Name())
				}
			}
			// Server spans end in any order (each after its trailers are out): find the
			// failed call's by name.
			missing := 0
			for _, s := range servers {
				failed := s.Name() == "test.Echo/Missing"
				if failed {
					missing++
				}
				if (s.Status().Code.String() == "Error") != failed {
					t.Errorf("server span %q status %v", s.Name(), s.Status())
				}
			}
			if missing != 1 {
				t.Errorf("%d server spans for the failed call, want 1", missing)
			}
		})
	}
}

// TestWorkers runs more concurrent calls than workers: the rest get goroutines.
func TestWorkers(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler, Workers: 2})
	cc := grpcClient(t, addr)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got frame
			if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: payload(i)}, &got); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// TestRapidReset: a client that opens streams and resets them at once (CVE-2023-44487) gets
// no more handlers running than MaxConcurrentStreams, even while the handlers of its reset
// streams have not returned yet; the rest are refused.
func TestRapidReset(t *testing.T) {
	const limit = 4
	var running, most atomic.Int32
	release := make(chan struct{})
	_, addr := startServer(t, ServerConfig{MaxConcurrentStreams: limit, Handler: func(any, grpc.ServerStream) error {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release // a handler slow to notice its stream was reset
		running.Add(-1)
		return nil
	}})
	defer close(release)

	nc, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/test.Echo/Block"}, {Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
		_ = enc.WriteField(f)
	}
	go func() { // the server's frames: read and dropped
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	for id := uint32(1); id < 400; id += 2 {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := most.Load(); n > limit || n == 0 {
		t.Errorf("%d handlers ran at once, want 1 to %d", n, limit)
	}
}
