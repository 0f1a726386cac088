package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/redact"
)

// serverCanary is a secret value sent through the server; it must appear in no log line.
const serverCanary = "SERVER-CANARY-93b1f2-pw"

// serverFake is a backends.Backend for the server tests: it records every unary call and
// answers with what answer returns (nil, nil when answer is nil). It counts one attempt per
// call, as a real backend does.
type serverFake struct {
	answer func(ctx context.Context, method string, req []byte) ([]byte, error)

	mu    sync.Mutex
	calls []serverFakeCall
}

type serverFakeCall struct {
	method string
	req    []byte
}

var _ backends.Backend = (*serverFake)(nil)

func (f *serverFake) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	backends.CallInfoFrom(ctx).AddAttempt()
	f.mu.Lock()
	f.calls = append(f.calls, serverFakeCall{method: method, req: slices.Clone(req)})
	f.mu.Unlock()
	if f.answer == nil {
		return nil, nil
	}
	return f.answer(ctx, method, req)
}

func (f *serverFake) Stream(ctx context.Context, method string, _ grpc.ServerStream) error {
	backends.CallInfoFrom(ctx).AddAttempt()
	f.mu.Lock()
	f.calls = append(f.calls, serverFakeCall{method: method})
	f.mu.Unlock()
	return backends.Errorf(backends.ClassUnimplemented, "backend \"fake\": no streams here (%s)", method)
}

func (f *serverFake) Ready(context.Context) error { return nil }
func (f *serverFake) Close() error                { return nil }

func (f *serverFake) recorded() []serverFakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// serverLog is a log buffer that the server's goroutines write while the test reads it.
type serverLog struct {
	testutil.SyncBuffer
}

// lines returns the JSON log records whose msg is msg.
func (l *serverLog) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// serverHarness is a proxy.Server serving one Unix listener in a temporary directory, and a
// client connection to it.
type serverHarness struct {
	srv      *Server
	sock     string
	conn     *grpc.ClientConn
	log      *serverLog
	serveErr chan error
}

// startServerHarness starts a Server with opts on transport tr (Log is set to a JSON logger at
// level) on a fresh socket with policy. The server is shut down when the test ends.
func startServerHarness(t *testing.T, tr Transport, opts Options, policy ListenerPolicy, level slog.Level) *serverHarness {
	t.Helper()
	ts := &serverHarness{log: &serverLog{}, serveErr: make(chan error, 1)}
	opts.Log = slog.New(slog.NewJSONHandler(ts.log, &slog.HandlerOptions{Level: level}))
	opts.Transport = tr
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = srv
	ts.sock = filepath.Join(t.TempDir(), "gw.sock")
	l, err := Listen(Endpoint{Scheme: "unix", Address: ts.sock}, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	go func() { ts.serveErr <- srv.Serve(l, policy) }()
	conn, err := grpc.NewClient("unix://"+ts.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ts.conn = conn
	t.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ts
}

// serverFakeOptions routes every method to the fake backend "fake".
func serverFakeOptions(f *serverFake) Options {
	return Options{
		Routes:   []Route{{Methods: []string{"*"}, Backend: "fake"}},
		Backends: map[string]backends.Backend{"fake": f},
	}
}

func serverCallCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func serverMountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func serverCreateVolumeRequest(name string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 8 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{serverMountCap()},
	}
}

// serverCaller is how the log names this process as a caller of the server.
func serverCaller() string {
	return fmt.Sprintf("uid=%d gid=%d pid=%d", os.Getuid(), os.Getgid(), os.Getpid())
}

func TestNewServerChecksRoutes(t *testing.T) {
	_, err := NewServer(Options{
		Routes:   []Route{{Methods: []string{"*"}, Backend: "array"}},
		Backends: map[string]backends.Backend{"fake": &serverFake{}},
	})
	if want := `routes[0].backend: no backend named "array"`; err == nil || err.Error() != want {
		t.Errorf("NewServer = %v, want %q", err, want)
	}
}

// TestServerForwards: the backend receives the caller's request and the caller receives the
// backend's response, both unchanged.
func TestServerForwards(t *testing.T) { onEachTransport(t, testServerForwards) }

func testServerForwards(t *testing.T, tr Transport) {
	want := &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", CapacityBytes: 8 << 20,
		VolumeContext: map[string]string{"pool": "p1"}}}
	wantBytes, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	fake := &serverFake{answer: func(context.Context, string, []byte) ([]byte, error) { return wantBytes, nil }}
	ts := startServerHarness(t, tr, serverFakeOptions(fake), ListenerPolicy{}, slog.LevelInfo)

	req := serverCreateVolumeRequest("pvc-1")
	req.Parameters = map[string]string{"tier": "gold"}
	got, err := csi.NewControllerClient(ts.conn).CreateVolume(serverCallCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("response = %v, want %v", got, want)
	}
	calls := fake.recorded()
	if len(calls) != 1 || calls[0].method != "/csi.v1.Controller/CreateVolume" {
		t.Fatalf("backend calls = %+v, want one CreateVolume", calls)
	}
	var sent csi.CreateVolumeRequest
	if err := proto.Unmarshal(calls[0].req, &sent); err != nil || !proto.Equal(&sent, req) {
		t.Errorf("backend received %v (%v), want %v", &sent, err, req)
	}

	// A method of a service the gateway does not know goes to the backend as a stream.
	err = ts.conn.Invoke(serverCallCtx(t), "/example.v1.Storage/Wipe", &emptypb.Empty{}, &emptypb.Empty{})
	st := status.Convert(err)
	if st.Code() != codes.Unimplemented || st.Message() != `backend "fake": no streams here (/example.v1.Storage/Wipe)` {
		t.Errorf("unknown method: %v %q", st.Code(), st.Message())
	}
	if calls := fake.recorded(); len(calls) != 2 || calls[1].method != "/example.v1.Storage/Wipe" {
		t.Errorf("backend calls = %+v, want the unknown method second", calls)
	}
}

// TestServerMatchesEmbeddedDirect: through the server, the embedded appliance answers what it
// answers when called directly.
func TestServerMatchesEmbeddedDirect(t *testing.T) {
	onEachTransport(t, testServerMatchesEmbeddedDirect)
}

func testServerMatchesEmbeddedDirect(t *testing.T, tr Transport) {
	be, err := embedded.OpenBackend("appliance", embedded.Config{DataDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	ts := startServerHarness(t, tr, Options{
		Routes:   []Route{{Methods: []string{"*"}, Backend: "appliance"}},
		Backends: map[string]backends.Backend{"appliance": be},
	}, ListenerPolicy{}, slog.LevelInfo)
	client := csi.NewControllerClient(ts.conn)

	req := serverCreateVolumeRequest("pvc-direct")
	viaGateway, err := client.CreateVolume(serverCallCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	directRaw, err := be.Unary(serverCallCtx(t), "/csi.v1.Controller/CreateVolume", raw)
	if err != nil {
		t.Fatal(err)
	}
	var direct csi.CreateVolumeResponse
	if err := proto.Unmarshal(directRaw, &direct); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(viaGateway, &direct) {
		t.Errorf("through the gateway: %v\ndirect: %v", viaGateway, &direct)
	}
	if viaGateway.GetVolume().GetVolumeId() == "" {
		t.Errorf("no volume ID in %v", viaGateway)
	}

	// The appliance's own refusal keeps its code and is prefixed with the backend's name.
	bigger := serverCreateVolumeRequest("pvc-direct")
	bigger.CapacityRange = &csi.CapacityRange{RequiredBytes: 64 << 20}
	_, err = client.CreateVolume(serverCallCtx(t), bigger)
	st := status.Convert(err)
	wantMsg := fmt.Sprintf(`backend "appliance": volume "pvc-direct" already exists as %s with %d bytes, outside the requested capacity_range; use another name or the same arguments`,
		viaGateway.GetVolume().GetVolumeId(), viaGateway.GetVolume().GetCapacityBytes())
	if st.Code() != codes.AlreadyExists || st.Message() != wantMsg {
		t.Errorf("incompatible CreateVolume: %v %q, want AlreadyExists %q", st.Code(), st.Message(), wantMsg)
	}

	// Deleting twice succeeds twice, with an empty response.
	for i := range 2 {
		resp, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: viaGateway.GetVolume().GetVolumeId()})
		if err != nil || proto.Size(resp) != 0 {
			t.Errorf("DeleteVolume #%d = %v, %v; want an empty response", i+1, resp, err)
		}
	}
}

func TestServerUnroutedMethod(t *testing.T) { onEachTransport(t, testServerUnroutedMethod) }

func testServerUnroutedMethod(t *testing.T, tr Transport) {
	fake := &serverFake{}
	ts := startServerHarness(t, tr, Options{
		Routes:   []Route{{Methods: []string{"/csi.v1.Node/*"}, Backend: "node"}},
		Backends: map[string]backends.Backend{"node": fake},
	}, ListenerPolicy{}, slog.LevelInfo)
	tests := []struct {
		method string
		req    proto.Message
	}{
		{"/csi.v1.Controller/CreateVolume", serverCreateVolumeRequest("pvc-1")},
		{"/csi.v1.SnapshotMetadata/GetMetadataAllocated", &csi.GetMetadataAllocatedRequest{SnapshotId: "s1"}},
		{"/example.v1.Storage/Wipe", &emptypb.Empty{}},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			err := ts.conn.Invoke(serverCallCtx(t), tt.method, tt.req, &emptypb.Empty{})
			st := status.Convert(err)
			want := "csi-gateway: no route for " + tt.method + "; add a route for it to the gateway's configuration"
			if st.Code() != codes.Unimplemented || st.Message() != want {
				t.Errorf("got %v %q, want Unimplemented %q", st.Code(), st.Message(), want)
			}
		})
	}
	if calls := fake.recorded(); len(calls) != 0 {
		t.Errorf("the backend was called: %+v", calls)
	}
	// The route that exists still works.
	if _, err := csi.NewNodeClient(ts.conn).NodeGetInfo(serverCallCtx(t), &csi.NodeGetInfoRequest{}); err != nil {
		t.Errorf("routed NodeGetInfo: %v", err)
	}
}

// TestServerListenerPolicy: a Unix caller whose uid and gid are not in the listener's lists
// is refused in the handshake: its call fails UNAVAILABLE (the connection is closed), no call
// reaches the chain or the backend, and the refusal is logged at warn with who it was.
func TestServerListenerPolicy(t *testing.T) { onEachTransport(t, testServerListenerPolicy) }

func testServerListenerPolicy(t *testing.T, tr Transport) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	denied := fmt.Sprintf("uid %d (gid %d) is not in this listener's allowUIDs/allowGIDs", uid, gid)
	tests := []struct {
		name   string
		policy ListenerPolicy
		want   codes.Code
	}{
		{"no allow-list", ListenerPolicy{}, codes.OK},
		{"uid listed", ListenerPolicy{AllowUIDs: []uint32{uid + 1, uid}}, codes.OK},
		{"gid listed", ListenerPolicy{AllowUIDs: []uint32{uid + 1}, AllowGIDs: []uint32{gid}}, codes.OK},
		{"uid not listed", ListenerPolicy{AllowUIDs: []uint32{uid + 1}}, codes.Unavailable},
		{"neither listed", ListenerPolicy{AllowUIDs: []uint32{uid + 1}, AllowGIDs: []uint32{gid + 1}}, codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &serverFake{}
			ts := startServerHarness(t, tr, serverFakeOptions(fake), tt.policy, slog.LevelInfo)
			_, err := csi.NewIdentityClient(ts.conn).Probe(serverCallCtx(t), &csi.ProbeRequest{})
			if st := status.Convert(err); st.Code() != tt.want {
				t.Fatalf("got %v %q, want %v", st.Code(), st.Message(), tt.want)
			}
			wantCalls := 0
			if tt.want == codes.OK {
				wantCalls = 1
			}
			if n := len(fake.recorded()); n != wantCalls {
				t.Errorf("backend called %d times, want %d", n, wantCalls)
			}
			if lines := ts.log.lines(t, "call"); len(lines) != wantCalls {
				t.Errorf("call log lines: %v, want %d", lines, wantCalls)
			}
			refusals := ts.log.lines(t, "caller refused at the handshake")
			if tt.want == codes.OK {
				if len(refusals) != 0 {
					t.Errorf("refusals logged: %v", refusals)
				}
				return
			}
			if len(refusals) == 0 || refusals[0]["level"] != "WARN" || refusals[0]["caller"] != serverCaller() ||
				refusals[0]["reason"] != denied || refusals[0]["listener"] != ts.sock {
				t.Errorf("refusal log: %v, want a warning naming %q, %q and the socket", refusals, serverCaller(), denied)
			}
		})
	}
}

func TestServerRecoversFromPanic(t *testing.T) { onEachTransport(t, testServerRecoversFromPanic) }

func testServerRecoversFromPanic(t *testing.T, tr Transport) {
	var n int
	var mu sync.Mutex
	fake := &serverFake{answer: func(context.Context, string, []byte) ([]byte, error) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			panic("backend bug: " + serverCanary)
		}
		return proto.Marshal(&csi.ProbeResponse{})
	}}
	ts := startServerHarness(t, tr, serverFakeOptions(fake), ListenerPolicy{}, slog.LevelInfo)
	client := csi.NewIdentityClient(ts.conn)

	_, err := client.Probe(serverCallCtx(t), &csi.ProbeRequest{})
	st := status.Convert(err)
	const wantMsg = "csi-gateway: internal error while serving Probe; see the gateway's log"
	if st.Code() != codes.Internal || st.Message() != wantMsg {
		t.Errorf("panicking call: %v %q, want Internal %q", st.Code(), st.Message(), wantMsg)
	}
	// The server keeps serving, on the same connection.
	for i := range 3 {
		if _, err := client.Probe(serverCallCtx(t), &csi.ProbeRequest{}); err != nil {
			t.Errorf("call %d after the panic: %v", i+2, err)
		}
	}
	panics := ts.log.lines(t, "panic while serving a call")
	if len(panics) != 1 {
		t.Fatalf("%d panic lines, want 1; log:\n%s", len(panics), ts.log)
	}
	if panics[0]["level"] != "ERROR" || panics[0]["method"] != "/csi.v1.Identity/Probe" ||
		!strings.Contains(fmt.Sprint(panics[0]["stack"]), "runtime/debug.Stack") {
		t.Errorf("panic line = %v", panics[0])
	}
	// The panicking call's line is the panic line above (recover sits outside the log
	// middleware); each call served after it has its own line.
	if lines := ts.log.lines(t, "call"); len(lines) != 3 {
		t.Errorf("%d call lines, want 3 (one per call served after the panic)", len(lines))
	}
}

// TestServerLogsOneLinePerCall: each call is one line with what an operator needs, and no
// payload at info level.
func TestServerLogsOneLinePerCall(t *testing.T) { onEachTransport(t, testServerLogsOneLinePerCall) }

func testServerLogsOneLinePerCall(t *testing.T, tr Transport) {
	fake := &serverFake{answer: func(_ context.Context, method string, _ []byte) ([]byte, error) {
		switch method {
		case "/csi.v1.Controller/DeleteVolume":
			return nil, backends.Errorf(backends.ClassNotFound, `backend "fake": volume vol-gone does not exist`)
		case "/csi.v1.Controller/ControllerPublishVolume":
			return nil, backends.Errorf(backends.ClassUnavailable, `backend "fake": array is restarting`)
		}
		return proto.Marshal(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1"}})
	}}
	ts := startServerHarness(t, tr, serverFakeOptions(fake), ListenerPolicy{}, slog.LevelInfo)
	client := csi.NewControllerClient(ts.conn)

	req := serverCreateVolumeRequest("pvc-log")
	req.Secrets = map[string]string{"password": serverCanary}
	if _, err := client.CreateVolume(serverCallCtx(t), req); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-gone"}); err != nil {
		t.Fatal(err)
	}
	_, err := client.ControllerPublishVolume(serverCallCtx(t), &csi.ControllerPublishVolumeRequest{
		VolumeId: "vol-1", NodeId: "node-1", VolumeCapability: serverMountCap()})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("ControllerPublishVolume: %v, want Unavailable", err)
	}

	lines := ts.log.lines(t, "call")
	if len(lines) != 3 {
		t.Fatalf("%d call lines, want 3; log:\n%s", len(lines), ts.log)
	}
	want := []map[string]any{
		{"level": "INFO", "method": "CreateVolume", "code": "OK", "name": "pvc-log"},
		{"level": "INFO", "method": "DeleteVolume", "code": "OK", "volume_id": "vol-gone"},
		{"level": "WARN", "method": "ControllerPublishVolume", "code": "Unavailable", "volume_id": "vol-1", "node_id": "node-1",
			"error": `backend "fake": array is restarting`},
	}
	for i, line := range lines {
		for k, v := range want[i] {
			if line[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i+1, k, line[k], v)
			}
		}
		for k, v := range map[string]any{"backend": "fake", "attempts": float64(1), "caller": serverCaller()} {
			if line[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i+1, k, line[k], v)
			}
		}
		if d, ok := line["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("line %d: duration_ms = %v", i+1, line["duration_ms"])
		}
		for _, k := range []string{"request", "response"} {
			if _, ok := line[k]; ok {
				t.Errorf("line %d: %s logged at info level", i+1, k)
			}
		}
		if _, ok := line["error"]; ok && line["code"] == "OK" {
			t.Errorf("line %d: an error on a call that succeeded", i+1)
		}
	}
	if strings.Contains(ts.log.String(), serverCanary) {
		t.Errorf("the log holds the secret:\n%s", ts.log)
	}
}

// TestServerDebugLogsRedactedPayloads: at debug level request and response are logged, with
// secrets and context values redacted.
func TestServerDebugLogsRedactedPayloads(t *testing.T) {
	onEachTransport(t, testServerDebugLogsRedactedPayloads)
}

func testServerDebugLogsRedactedPayloads(t *testing.T, tr Transport) {
	const chap = "chap-" + serverCanary
	fake := &serverFake{answer: func(context.Context, string, []byte) ([]byte, error) {
		return proto.Marshal(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-9", CapacityBytes: 8 << 20,
			VolumeContext: map[string]string{"chapPassword": chap}}})
	}}
	ts := startServerHarness(t, tr, serverFakeOptions(fake), ListenerPolicy{}, slog.LevelDebug)

	req := serverCreateVolumeRequest("pvc-debug")
	req.Secrets = map[string]string{"password": serverCanary}
	req.VolumeCapabilities[0].GetMount().MountFlags = []string{"password=" + serverCanary}
	req.Parameters = map[string]string{"tier": "gold"}
	if _, err := csi.NewControllerClient(ts.conn).CreateVolume(serverCallCtx(t), req); err != nil {
		t.Fatal(err)
	}
	lines := ts.log.lines(t, "call")
	if len(lines) != 1 {
		t.Fatalf("%d call lines, want 1; log:\n%s", len(lines), ts.log)
	}
	var loggedReq struct {
		Name               string            `json:"name"`
		Secrets            map[string]string `json:"secrets"`
		Parameters         map[string]string `json:"parameters"`
		VolumeCapabilities []struct {
			Mount struct {
				MountFlags []string `json:"mountFlags"`
			} `json:"mount"`
		} `json:"volumeCapabilities"`
	}
	if err := json.Unmarshal([]byte(fmt.Sprint(lines[0]["request"])), &loggedReq); err != nil {
		t.Fatalf("request %q: %v", lines[0]["request"], err)
	}
	if loggedReq.Name != "pvc-debug" || loggedReq.Parameters["tier"] != "gold" ||
		loggedReq.Secrets["password"] != redact.RedactedValue || len(loggedReq.VolumeCapabilities) != 1 ||
		!slices.Equal(loggedReq.VolumeCapabilities[0].Mount.MountFlags, []string{redact.RedactedValue}) {
		t.Errorf("logged request = %+v", loggedReq)
	}
	var loggedResp struct {
		Volume struct {
			VolumeID      string            `json:"volumeId"`
			VolumeContext map[string]string `json:"volumeContext"`
		} `json:"volume"`
	}
	if err := json.Unmarshal([]byte(fmt.Sprint(lines[0]["response"])), &loggedResp); err != nil {
		t.Fatalf("response %q: %v", lines[0]["response"], err)
	}
	if loggedResp.Volume.VolumeID != "vol-9" || loggedResp.Volume.VolumeContext["chapPassword"] != redact.RedactedValue {
		t.Errorf("logged response = %+v", loggedResp)
	}
	if strings.Contains(ts.log.String(), serverCanary) {
		t.Errorf("the log holds the secret:\n%s", ts.log)
	}
}

// serverBlockingFake returns a backend whose calls signal entered and then wait for release or
// for their context to end; what the context said is sent on ended.
func serverBlockingFake() (f *serverFake, entered chan struct{}, release chan struct{}, ended chan error) {
	entered, release, ended = make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	f = &serverFake{answer: func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		entered <- struct{}{}
		select {
		case <-release:
			ended <- nil
			return proto.Marshal(&csi.ProbeResponse{})
		case <-ctx.Done():
			ended <- ctx.Err()
			return nil, ctx.Err()
		}
	}}
	return f, entered, release, ended
}

func serverWait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestServerShutdownWaitsForCallInFlight(t *testing.T) {
	onEachTransport(t, testServerShutdownWaitsForCallInFlight)
}

func testServerShutdownWaitsForCallInFlight(t *testing.T, tr Transport) {
	fake, entered, release, ended := serverBlockingFake()
	ts := startServerHarness(t, tr, serverFakeOptions(fake), ListenerPolicy{}, slog.LevelInfo)

	callErr := make(chan error, 1)
	go func() {
		_, err := csi.NewIdentityClient(ts.conn).Probe(context.Background(), &csi.ProbeRequest{})
		callErr <- err
	}()
	serverWait(t, entered, "the call to reach the backend")

	shutdownDone := make(chan struct{})
	go func() {
		ts.srv.Shutdown(context.Background())
		close(shutdownDone)
	}()
	select {
	case <-shutdownDone:
		t.Fatal("Shutdown returned while a call was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := serverWait(t, callErr, "the call in flight"); err != nil {
		t.Errorf("the call in flight failed: %v", err)
	}
	if err := serverWait(t, ended, "the backend"); err != nil {
		t.Errorf("the backend's context ended: %v", err)
	}
	serverWait(t, shutdownDone, "Shutdown")
	if err := serverWait(t, ts.serveErr, "Serve to return"); err != nil {
		t.Errorf("Serve = %v after Shutdown, want nil", err)
	}
	if _, err := os.Lstat(ts.sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket after Shutdown: %v, want it removed", err)
	}
	// No more listeners once shut down; the refused listener is closed, its socket removed
	// (a listener started as a shutdown begins must not leave its socket behind).
	late := filepath.Join(t.TempDir(), "late.sock")
	l, err := Listen(Endpoint{Scheme: "unix", Address: late}, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.Serve(l, ListenerPolicy{}); err == nil || err.Error() != "server is shut down" {
		t.Errorf("Serve after Shutdown = %v, want \"server is shut down\"", err)
	}
	if _, err := os.Lstat(late); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket of a listener refused after Shutdown: %v, want it removed", err)
	}
}

func TestServerShutdownCancelsAfterDeadline(t *testing.T) {
	onEachTransport(t, testServerShutdownCancelsAfterDeadline)
}

func testServerShutdownCancelsAfterDeadline(t *testing.T, tr Transport) {
	fake, entered, _, ended := serverBlockingFake()
	ts := startServerHarness(t, tr, serverFakeOptions(fake), ListenerPolicy{}, slog.LevelInfo)

	callErr := make(chan error, 1)
	go func() {
		_, err := csi.NewIdentityClient(ts.conn).Probe(context.Background(), &csi.ProbeRequest{})
		callErr <- err
	}()
	serverWait(t, entered, "the call to reach the backend")

	start := time.Now() // before the grace period's clock starts: on a loaded machine they drift
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ts.srv.Shutdown(ctx)
	if d := time.Since(start); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("Shutdown took %v, want the grace period (100ms) and a little more", d)
	}
	if err := serverWait(t, ended, "the backend"); !errors.Is(err, context.Canceled) {
		t.Errorf("the backend's context ended with %v, want it canceled", err)
	}
	if err := serverWait(t, callErr, "the call in flight"); status.Code(err) != codes.Unavailable {
		t.Errorf("the call in flight ended with %v, want Unavailable", err)
	}
	if err := serverWait(t, ts.serveErr, "Serve to return"); err != nil {
		t.Errorf("Serve = %v after Shutdown, want nil", err)
	}
	if _, err := os.Lstat(ts.sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket after Shutdown: %v, want it removed", err)
	}
}
