package grpcbackend

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// clientToken is the token the backend's client under test appends to every user-agent.
func clientToken() string {
	if framesUnderTest {
		return "grpc-go-h2grpc/1"
	}
	return "grpc-go/" + grpc.Version
}

// agentDriver is a driver on a real Unix socket that answers every call with an empty message
// and records the user-agent of each, and how many connections it accepted.
type agentDriver struct {
	target   string
	srv      *grpc.Server
	accepted atomic.Int32

	mu    sync.Mutex
	calls []agentCall
}

type agentCall struct{ method, ua string }

func startAgentDriver(t testing.TB, path string) *agentDriver {
	t.Helper()
	d := &agentDriver{target: "unix://" + path}
	d.srv = grpc.NewServer(grpc.ForceServerCodecV2(rawcodec.Codec{}), grpc.UnknownServiceHandler(func(_ any, s grpc.ServerStream) error {
		var req rawcodec.Frame
		if err := s.RecvMsg(&req); err != nil {
			return err
		}
		method, _ := grpc.MethodFromServerStream(s)
		md, _ := metadata.FromIncomingContext(s.Context())
		d.mu.Lock()
		d.calls = append(d.calls, agentCall{method, strings.Join(md.Get("user-agent"), "|")})
		d.mu.Unlock()
		return s.SendMsg(&rawcodec.Frame{})
	}))
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.srv.Serve(countingListener{lis, &d.accepted}) }()
	t.Cleanup(d.srv.Stop)
	return d
}

// agents returns the user-agent of every call of method, in order.
func (d *agentDriver) agents(method string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, c := range d.calls {
		if c.method == method {
			out = append(out, c.ua)
		}
	}
	return out
}

type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// callAs makes one unary call through b as a caller whose user-agent is ua, as the gateway's
// server hands it over (in the incoming metadata).
func callAs(t *testing.T, b *Backend, ua, method string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.Unary(metadata.NewIncomingContext(ctx, metadata.Pairs("user-agent", ua)), method, nil)
	return err
}

// TestCallerUserAgentReachesDriver: two callers with different user-agents call through the
// backend, by Unary and by Stream: the driver sees on each call its caller's user-agent — what
// it sees from the same caller calling it directly — followed by the backend's client's token.
// The backend's own calls (Ready's probe, a call without a caller such as the gateway's
// capability fetch) carry the backend's user-agent.
func TestCallerUserAgentReachesDriver(t *testing.T) {
	d := startAgentDriver(t, socketPath(t, "d.sock"))
	b := newBackend(t, d.target, WithUserAgent("csi-gateway/test"))
	fronts := []*front{startFront(t, b, true), startFront(t, b, false)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	invoke := func(target, ua, method string) {
		t.Helper()
		if err := dialAs(t, target, ua).Invoke(ctx, method, &rawcodec.Frame{}, &rawcodec.Frame{}, grpc.ForceCodecV2(rawcodec.Codec{})); err != nil {
			t.Fatalf("%s as %s: %v", method, ua, err)
		}
	}
	callers := map[string]string{
		"csi-provisioner/v5.1.0": "/csi.v1.Controller/CreateVolume",
		"kubelet/v1.31.4":        "/csi.v1.Node/NodePublishVolume",
	}
	for ua, method := range callers {
		for _, f := range fronts {
			invoke(f.target, ua, method)
		}
		invoke(d.target, ua, "/direct"+method) // the same caller, without the gateway
	}
	if err := b.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Unary(ctx, "/csi.v1.Controller/ControllerGetCapabilities", nil); err != nil {
		t.Fatal(err)
	}

	for ua, method := range callers {
		direct := d.agents("/direct" + method)
		if want := ua + " grpc-go/" + grpc.Version; len(direct) != 1 || direct[0] != want {
			t.Fatalf("called directly, the driver saw %q, want [%q]", direct, want)
		}
		want := direct[0] + " " + clientToken()
		if got := d.agents(method); len(got) != 2 || got[0] != want || got[1] != want {
			t.Errorf("%s through the backend (unary, stream): the driver saw %q, want %q twice", method, got, want)
		}
	}
	own := "csi-gateway/test " + clientToken()
	for _, method := range []string{"/csi.v1.Identity/Probe", "/csi.v1.Controller/ControllerGetCapabilities"} {
		if got := d.agents(method); len(got) == 0 || got[len(got)-1] != own {
			t.Errorf("%s, the backend's own call: the driver saw %q, want %q", method, got, own)
		}
	}
}

// TestCallerUserAgentsBounded: callers cannot make the backend open connections without end.
// On grpc-go's transport the first maxAgents user-agents get connections of their own and the
// others' calls go over the backend's own connection, with its user-agent, said once in the
// log; the frame client needs no connection for a user-agent, so there all keep their own. A
// new user-agent takes the place of the agent unused for longest once that one has had no
// call for agentIdle, never of one with a call in flight.
func TestCallerUserAgentsBounded(t *testing.T) {
	d := startAgentDriver(t, socketPath(t, "d.sock"))
	var clock atomic.Int64 // nanoseconds since 2026-01-01, so that tests control time
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fakeNow := func(o *options) { o.agents.now = func() time.Time { return epoch.Add(time.Duration(clock.Load())) } }
	var logs testutil.SyncBuffer
	b := newBackend(t, d.target, WithUserAgent("csi-gateway/test"), fakeNow, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	const method = "/csi.v1.Controller/CreateVolume"
	sees := func(ua, want string) {
		t.Helper()
		clock.Add(int64(time.Second)) // every call at a time of its own
		if err := callAs(t, b, ua, method); err != nil {
			t.Fatalf("as %s: %v", ua, err)
		}
		if got := d.agents(method); got[len(got)-1] != want+" "+clientToken() {
			t.Errorf("as %s: the driver saw %q, want %q", ua, got[len(got)-1], want+" "+clientToken())
		}
	}
	past := func(ua string) string { // what a caller past the bound is seen as
		if framesUnderTest {
			return ua
		}
		return "csi-gateway/test"
	}
	for i := range maxAgents + 10 {
		ua := fmt.Sprintf("caller-%d/v1", i)
		want := ua
		if i >= maxAgents {
			want = past(ua)
		}
		sees(ua, want)
		sees(ua, want) // again: the same connection
	}
	wantConns := int32(1 + maxAgents) // the backend's own, one per agent
	if framesUnderTest {
		wantConns = 1
	}
	if n := d.accepted.Load(); n != wantConns {
		t.Errorf("the driver accepted %d connections, want %d", n, wantConns)
	}
	if n := strings.Count(logs.String(), "too many distinct caller user-agents"); framesUnderTest && n != 0 || !framesUnderTest && n != 1 {
		t.Errorf("the log says %d times that the set is full:\n%s", n, logs.String())
	}

	// Time passes: every agent is idle, but caller-1 calls again; a new caller takes the place
	// of caller-0 (unused for longest), and caller-0, back, that of caller-2.
	clock.Add(int64(agentIdle))
	sees("caller-1/v1", "caller-1/v1")
	sees("newcomer/v2", "newcomer/v2")
	sees("caller-0/v1", "caller-0/v1")
	if !framesUnderTest {
		wantConns += 2
	}
	if n := d.accepted.Load(); n != wantConns {
		t.Errorf("the driver accepted %d connections, want %d", n, wantConns)
	}
	// A call in flight keeps its agent's place, however old.
	held := b.agents.acquire("caller-3/v1")
	clock.Add(int64(10 * agentIdle))
	for i := range maxAgents - 1 { // every other place
		sees(fmt.Sprintf("late-%d/v3", i), fmt.Sprintf("late-%d/v3", i))
	}
	sees("one-too-many/v3", past("one-too-many/v3"))
	b.agents.release(held)
	sees("caller-3/v1", "caller-3/v1")
}

// TestCallerUserAgentCatchesUp: a caller's connection waiting out a long reconnect backoff
// after its driver restarted is woken once the backend's readiness finds the driver back, so
// the caller's calls do not fail for longer than the backend's.
func TestCallerUserAgentCatchesUp(t *testing.T) {
	if framesUnderTest {
		t.Skip("the frame client has no backoff: it dials on the next call")
	}
	path := socketPath(t, "d.sock")
	d := startAgentDriver(t, path)
	slow := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{BaseDelay: time.Hour, Multiplier: 1, MaxDelay: time.Hour}, MinConnectTimeout: 5 * time.Second})
	b := newBackend(t, d.target, WithDialOptions(slow))
	const ua, method = "kubelet/v1.31.4", "/csi.v1.Node/NodeGetCapabilities"
	if err := callAs(t, b, ua, method); err != nil {
		t.Fatal(err)
	}
	a := b.agents.acquire(ua)
	b.agents.release(a)
	d.srv.Stop()
	// Until the caller's connection has failed to connect: a call after the driver went away
	// may find it idle (the connection lost), and grpc-go fails calls on a new state a moment
	// before it publishes it.
	deadline := time.Now().Add(10 * time.Second)
	for a.conns[0].GetState() != connectivity.TransientFailure {
		if time.Now().After(deadline) {
			t.Fatalf("the caller's connection is %v, want TRANSIENT_FAILURE (in its hour of backoff)", a.conns[0].GetState())
		}
		_ = callAs(t, b, ua, method)
		time.Sleep(10 * time.Millisecond)
	}
	startAgentDriver(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Ready(ctx); err != nil {
		t.Fatalf("Ready with the driver back: %v", err)
	}
	if err := callAs(t, b, ua, method); err != nil {
		t.Errorf("the caller's call once the backend is ready again: %v", err)
	}
}

// TestCallerUserAgentsClosed: Close closes the agents' connections, and a call after it makes
// none.
func TestCallerUserAgentsClosed(t *testing.T) {
	d := startAgentDriver(t, socketPath(t, "d.sock"))
	b := newBackend(t, d.target)
	for _, ua := range []string{"csi-provisioner/v5.1.0", "kubelet/v1.31.4"} {
		if err := callAs(t, b, ua, "/csi.v1.Identity/GetPluginInfo"); err != nil {
			t.Fatal(err)
		}
	}
	agents := make([]*agent, 0, 2)
	for _, a := range b.agents.byUA {
		agents = append(agents, a)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		for _, c := range a.conns {
			if s := c.GetState(); s != connectivity.Shutdown {
				t.Errorf("%s: after Close, its connection is %v", a.ua, s)
			}
		}
	}
	if callAs(t, b, "late/v1", "/csi.v1.Identity/GetPluginInfo") == nil {
		t.Error("a call after Close succeeded")
	}
	if a := b.agents.acquire("late/v1"); a != nil || len(b.agents.byUA) != 0 {
		t.Errorf("after Close: acquire = %v, %d agents kept", a, len(b.agents.byUA))
	}
}

// TestCallerUserAgentsConcurrent: many callers at once, more user-agents than places: every call
// succeeds, and the driver never gets more than one connection per place plus the backend's.
func TestCallerUserAgentsConcurrent(t *testing.T) {
	d := startAgentDriver(t, socketPath(t, "d.sock"))
	b := newBackend(t, d.target)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3 * maxAgents {
				if err := callAs(t, b, fmt.Sprintf("caller-%d/v1", (g+i)%(2*maxAgents)), "/csi.v1.Identity/GetPluginInfo"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := d.accepted.Load(); n > 1+maxAgents {
		t.Errorf("the driver accepted %d connections, at most %d expected", n, 1+maxAgents)
	}
}
