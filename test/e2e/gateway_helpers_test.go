package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// The services the test drivers decode, registered in the protobuf registry.
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/csi-addons/spec/lib/go/volumegroup"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy"
)

// This file holds what the gateway_*_test.go end-to-end tests share: a CSI driver written in
// the test (a real grpc.Server on a Unix socket that sees every request as raw bytes), and
// starting the real gateway binary on a configuration written by the test.

// driverCall is one call a test driver received.
type driverCall struct {
	Method  string
	Request []byte      // the request frame, exactly as it arrived
	MD      metadata.MD // the incoming metadata
	// Deadline is the call's deadline as the driver saw it; zero when it had none.
	Deadline time.Time
	Received time.Time
	// ended is closed when the handler returns; canceled records whether the call's context
	// was done by then.
	ended    chan struct{}
	canceled bool
}

// driverFunc answers one call to a test driver: it sends response frames with send (a unary
// method must send exactly one on success; when it sends none and returns nil, the driver
// sends an empty response for a unary method) and returns the call's status.
type driverFunc func(ctx context.Context, c *driverCall, send func(b []byte) error) error

// testDriver is a CSI driver written in the test: a real grpc.Server on a Unix socket whose
// unknown-service handler takes every method it does not otherwise register, records the
// request bytes, metadata and deadline, and lets a driverFunc answer.
type testDriver struct {
	Endpoint string // unix:///...
	fn       driverFunc

	mu      sync.Mutex
	calls   []*driverCall
	arrived chan *driverCall
}

// startTestDriver serves fn on dir/name (a socket path) until the test ends. register adds
// typed services to the same server.
func startTestDriver(t *testing.T, dir, name string, fn driverFunc, register ...func(*grpc.Server)) *testDriver {
	t.Helper()
	path := filepath.Join(dir, name)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("test driver: %v", err)
	}
	d := &testDriver{Endpoint: "unix://" + path, fn: fn, arrived: make(chan *driverCall, 1024)}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawcodec.Codec{}), grpc.UnknownServiceHandler(d.handle))
	for _, r := range register {
		r(srv)
	}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return d
}

func (d *testDriver) handle(_ any, stream grpc.ServerStream) error {
	ctx := stream.Context()
	method, _ := grpc.MethodFromServerStream(stream)
	var req rawcodec.Frame
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	c := &driverCall{Method: method, Request: req.Payload, MD: md, Received: time.Now(), ended: make(chan struct{})}
	if dl, ok := ctx.Deadline(); ok {
		c.Deadline = dl
	}
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
	select {
	case d.arrived <- c:
	default: // a test that makes this many calls does not wait for arrivals; Calls has them all
	}
	defer func() {
		c.canceled = ctx.Err() != nil
		close(c.ended)
	}()
	sent := 0
	err := d.fn(ctx, c, func(b []byte) error {
		sent++
		return stream.SendMsg(&rawcodec.Frame{Payload: b})
	})
	if err == nil && sent == 0 && !serverStreaming(method) {
		return stream.SendMsg(&rawcodec.Frame{})
	}
	return err
}

// Calls returns the calls of method received so far, oldest first.
func (d *testDriver) Calls(method string) []*driverCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*driverCall
	for _, c := range d.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// waitArrivals waits until n more calls have arrived and returns them.
func (d *testDriver) waitArrivals(t *testing.T, n int, timeout time.Duration) []*driverCall {
	t.Helper()
	var out []*driverCall
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case c := <-d.arrived:
			out = append(out, c)
		case <-deadline:
			t.Fatalf("the driver received %d of %d calls within %v", len(out), n, timeout)
		}
	}
	return out
}

// methodDesc returns the registry's description of a full method name, or nil.
func methodDesc(full string) protoreflect.MethodDescriptor {
	service, name, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	return sd.Methods().ByName(protoreflect.Name(name))
}

func serverStreaming(full string) bool {
	md := methodDesc(full)
	return md != nil && md.IsStreamingServer()
}

// newMessage returns an empty message of the registered Go type named d.
func newMessage(d protoreflect.MessageDescriptor) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		panic(fmt.Sprintf("%s is not registered: %v", d.FullName(), err))
	}
	return mt.New().Interface()
}

// marshal encodes a message the test built; it cannot fail for those.
func marshal(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// gatewayProc is the real gateway binary serving on a Unix socket in the test's directory.
type gatewayProc struct {
	*testutil.Process
	Endpoint string // unix:///.../gw.sock
	Socket   string // the socket's path
	Conn     *grpc.ClientConn
}

// startGatewayWith writes a configuration with one listener (dir/gw.sock) followed by body
// (backends, routes, logging, shutdown: YAML at the top level), starts `csi-gateway serve
// --config` on it and waits until the socket accepts connections. It does not call any
// method: the routes of some tests lead nowhere healthy.
// noValidation turns the gateway's spec validation off, for tests whose in-test drivers answer
// the capability calls (which validation asks) with nothing: they test passthrough,
// redaction and shutdown, not conformance.
const noValidation = "validation: off\n"

func startGatewayWith(t *testing.T, dir, body string) *gatewayProc {
	t.Helper()
	sock := filepath.Join(dir, "gw.sock")
	config := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf("listeners:\n  - endpoint: unix://%s\n%s", sock, body)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testutil.Start(t, "serve", "--config", config)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			break
		}
		if exited(p) || time.Now().After(deadline) {
			t.Fatalf("the gateway did not listen on %s: %v\nconfig:\n%s\noutput:\n%s", sock, err, yaml, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &gatewayProc{Process: p, Endpoint: "unix://" + sock, Socket: sock, Conn: conn}
}

// onEachTransport runs test once on each of the gateway's transports (its `transport` key),
// as the subtests "grpc" (the default) and "frames".
func onEachTransport(t *testing.T, test func(t *testing.T, transport string)) {
	for _, transport := range []string{"grpc", "frames"} {
		t.Run(transport, func(t *testing.T) { test(t, transport) })
	}
}

// waitOutput waits until the process's output contains want (log lines reach the test
// through a pipe, a moment after the call they describe has been answered).
func waitOutput(t *testing.T, p *testutil.Process, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Output(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the output does not contain %q after %v:\n%s", want, timeout, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkStatus checks that err is a status with the given code whose message is non-empty, at
// most 1 KiB, and carries no details (CSI forbids them); it returns the status.
func checkStatus(t *testing.T, what string, err error, want codes.Code) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Errorf("%s: %v is not a gRPC status", what, err)
		return st
	}
	if st.Code() != want {
		t.Errorf("%s: code %s (%q), want %s", what, st.Code(), st.Message(), want)
	}
	if want == codes.OK {
		return st
	}
	if st.Message() == "" {
		t.Errorf("%s: empty message", what)
	}
	if len(st.Message()) > 1024 {
		t.Errorf("%s: message of %d bytes, want at most 1024", what, len(st.Message()))
	}
	if len(st.Proto().GetDetails()) != 0 {
		t.Errorf("%s: status has %d details, want none", what, len(st.Proto().GetDetails()))
	}
	return st
}

// exited reports whether the process has exited.
func exited(p *testutil.Process) bool {
	err := p.Wait(0)
	var ee *exec.ExitError
	return err == nil || errors.As(err, &ee)
}

// invoke calls method through conn with req and returns its responses: one for a unary
// method, every frame for a server-streaming one. opts apply to the call or stream.
func invoke(ctx context.Context, conn *grpc.ClientConn, method string, req proto.Message, opts ...grpc.CallOption) ([]proto.Message, error) {
	md := methodDesc(method)
	if md == nil {
		return nil, fmt.Errorf("%s is not in the registry", method)
	}
	if !md.IsStreamingServer() {
		resp := newMessage(md.Output())
		if err := conn.Invoke(ctx, method, req, resp, opts...); err != nil {
			return nil, err
		}
		return []proto.Message{resp}, nil
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, opts...)
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	var out []proto.Message
	for {
		resp := newMessage(md.Output())
		err := s.RecvMsg(resp)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, resp)
	}
}

// runCLI runs the real binary to completion with args and returns its combined output and
// exit status.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, testutil.Binary(t), args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("csi-gateway %s: %v\n%s", strings.Join(args, " "), err, out)
	return "", 0
}

// serveOnSocket serves srv on a Unix socket of the test's own and returns a client of it; the
// test's end closes the client and shuts the server down, and Serve must then return nil.
func serveOnSocket(t *testing.T, srv *proxy.Server) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "gw.sock")
	l, err := proxy.Listen(proxy.Endpoint{Scheme: "unix", Address: sock}, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l, proxy.ListenerPolicy{}) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return conn
}

// stopAndCheckCanaries stops the gateway with SIGTERM (which flushes its spans to stdout),
// adds its log and spans to sinks as "the gateway's log and spans", and fails the test for
// every canary any sink holds.
func stopAndCheckCanaries(t *testing.T, gw *gatewayProc, sinks map[string]string, canaries []string) {
	t.Helper()
	if err := gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := gw.Wait(30 * time.Second); err != nil {
		t.Fatalf("the gateway did not stop cleanly: %v", err)
	}
	sinks["the gateway's log and spans"] = gw.Output()
	for name, text := range sinks {
		for _, c := range canaries {
			if strings.Contains(text, c) {
				t.Errorf("%s holds canary %s", name, c)
			}
		}
	}
}
