package h2grpc

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// frame is a raw message for the tests' codec.
type frame struct{ b []byte }

// rawCodec passes *frame payloads through; its name is "proto" like the gateway's.
type rawCodec struct{}

var _ encoding.CodecV2 = rawCodec{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	f.b = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// unixListener listens on a socket in a fresh temporary directory.
func unixListener(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// startServer serves cfg (Creds defaulting to insecure, Codec to rawCodec) on a Unix socket
// and stops it at the end of the test. It returns the server and the socket address.
func startServer(t testing.TB, cfg ServerConfig) (*Server, string) {
	t.Helper()
	if cfg.Creds == nil {
		cfg.Creds = insecure.NewCredentials()
	}
	if cfg.Codec == nil {
		cfg.Codec = rawCodec{}
	}
	l := unixListener(t)
	s := NewServer(cfg)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, l.Addr().String()
}

// grpcClient is a grpc-go client of the Unix socket at addr, closed at the end of the test.
func grpcClient(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})),
	}, opts...)
	cc, err := grpc.NewClient("unix://"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// checkGoroutines fails the test when, after a settle period, more goroutines run than
// before (registered first, so it runs after every other cleanup).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		var n int
		for range 200 {
			if n = runtime.NumGoroutine(); n <= before {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("goroutines: %d before, %d after:\n%s", before, n, buf)
	})
}

// newTestClient is an h2grpc client of the Unix socket at addr (Creds defaulting to insecure,
// Codec to rawCodec, Authority to "localhost"), closed at the end of the test.
func newTestClient(t testing.TB, addr string, cfg ClientConfig) *ClientConn {
	t.Helper()
	if cfg.Dial == nil {
		cfg.Dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}
	}
	if cfg.Creds == nil {
		cfg.Creds = insecure.NewCredentials()
	}
	if cfg.Codec == nil {
		cfg.Codec = rawCodec{}
	}
	if cfg.Authority == "" {
		cfg.Authority = "localhost"
	}
	cc := NewClientConn(cfg)
	t.Cleanup(func() { cc.Close() })
	return cc
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
