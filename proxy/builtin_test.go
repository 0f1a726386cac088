package proxy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// switchableBackend is a serverFake whose readiness the test turns off and on.
type switchableBackend struct {
	serverFake
	down atomic.Bool
}

func (b *switchableBackend) Ready(context.Context) error {
	if b.down.Load() {
		return errors.New("backend \"fake\": the array does not answer")
	}
	return nil
}

// builtinHarness is a gateway with one switchable backend, readiness checked on every probe,
// and a listener allowed methods (all when empty).
func startBuiltinHarness(t *testing.T, tr Transport, methods ...string) (*serverHarness, *switchableBackend) {
	t.Helper()
	be := &switchableBackend{}
	be.answer = func(_ context.Context, method string, _ []byte) ([]byte, error) {
		if method != "/csi.v1.Identity/GetPluginInfo" {
			return nil, nil
		}
		return proto.Marshal(&csi.GetPluginInfoResponse{Name: "fake.csi.example.com", VendorVersion: "1.2.3"})
	}
	opts := serverFakeOptions(&be.serverFake)
	opts.Backends = map[string]backends.Backend{"fake": be}
	opts.Readiness = listening(NewReadiness(opts.Backends, WithReadyCacheTTL(0)))
	return startServerHarness(t, tr, opts, ListenerPolicy{Methods: auth.MethodAllowList{Patterns: methods}}, slog.LevelInfo), be
}

// TestHealthService: every listener answers grpc.health.v1.Health itself, on both transports:
// the overall status and each service's follow readiness, unknown services are NOT_FOUND,
// Watch sends the change, and none of it reaches the backend or the call log.
func TestHealthService(t *testing.T) { onEachTransport(t, testHealthService) }

func testHealthService(t *testing.T, tr Transport) {
	ts, be := startBuiltinHarness(t, tr)
	ctx := serverCallCtx(t)
	health := healthpb.NewHealthClient(ts.conn)
	check := func(service string) (healthpb.HealthCheckResponse_ServingStatus, codes.Code) {
		t.Helper()
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		return resp.GetStatus(), status.Code(err)
	}
	for _, service := range []string{"", "csi.v1.Controller", "csi.v1.Node", "volumegroup.Controller", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if st, code := check(service); st != healthpb.HealthCheckResponse_SERVING || code != codes.OK {
			t.Errorf("Check(%q) = %v, %v; want SERVING", service, st, code)
		}
	}
	if _, code := check("example.Unknown"); code != codes.NotFound {
		t.Errorf("Check(unknown service) code = %v, want NotFound", code)
	}
	list, err := health.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || list.GetStatuses()["csi.v1.Identity"].GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("List = %v, %v; want csi.v1.Identity SERVING", list, err)
	}

	watch, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := watch.Recv(); err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch first = %v, %v; want SERVING", first, err)
	}
	be.down.Store(true)
	if next, err := watch.Recv(); err != nil || next.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after the backend went down = %v, %v; want NOT_SERVING", next, err)
	}
	for _, service := range []string{"", "csi.v1.Controller"} {
		if st, _ := check(service); st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("Check(%q) with the backend down = %v, want NOT_SERVING", service, st)
		}
	}
	if st, _ := check("grpc.health.v1.Health"); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check(health) with the backend down = %v, want SERVING (it needs no backend)", st)
	}
	be.down.Store(false)
	if next, err := watch.Recv(); err != nil || next.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch after the backend came back = %v, %v; want SERVING", next, err)
	}

	if calls := be.recorded(); len(calls) != 0 {
		t.Errorf("the backend saw %d calls, want none: %+v", len(calls), calls)
	}
	if lines := ts.log.lines(t, "call"); len(lines) != 0 {
		t.Errorf("health calls were logged: %v", lines)
	}
}

// TestHealthServicePerListener: a listener's methods allow-list does not refuse health, and
// its health knows only the services it lets callers call.
func TestHealthServicePerListener(t *testing.T) {
	ts, _ := startBuiltinHarness(t, TransportGRPC, "/csi.v1.Identity/*")
	ctx := serverCallCtx(t)
	health := healthpb.NewHealthClient(ts.conn)
	if resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "csi.v1.Identity"}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check(Identity) = %v, %v; want SERVING", resp, err)
	}
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "csi.v1.Controller"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(Controller) on an Identity-only listener: %v, want NotFound", err)
	}
}

// TestReflectionService: both reflection versions list the services the gateway knows and
// describe them from the registry, on both transports, whatever the listener's allow-list.
func TestReflectionService(t *testing.T) { onEachTransport(t, testReflectionService) }

func testReflectionService(t *testing.T, tr Transport) {
	ts, be := startBuiltinHarness(t, tr, "/csi.v1.Identity/*")
	ctx := serverCallCtx(t)
	want := []string{"csi.v1.Controller", "csi.v1.GroupController", "csi.v1.Identity", "csi.v1.Node",
		"csi.v1.SnapshotMetadata", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
		"grpc.reflection.v1alpha.ServerReflection", "volumegroup.Controller"}

	v1, err := reflectionv1.NewServerReflectionClient(ts.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := v1.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := v1.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	for _, name := range want {
		if !slices.Contains(got, name) {
			t.Errorf("v1 ListServices = %v, missing %s", got, name)
		}
	}
	if err := v1.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "csi.v1.Controller"}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := v1.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("v1 FileContainingSymbol(csi.v1.Controller) = %v, %v; want its file", resp, err)
	}

	alpha, err := reflectionv1alpha.NewServerReflectionClient(ts.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 v1alpha is deprecated, and served on purpose: older tools ask only it
	if err := alpha.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 v1alpha is deprecated, and served on purpose: older tools ask only it
	if resp, err := alpha.Recv(); err != nil || len(resp.GetListServicesResponse().GetService()) != len(got) {
		t.Errorf("v1alpha ListServices = %v, %v; want the %d services of v1", resp, err, len(got))
	}
	// The backend is asked for its reflection (ListServices merges it; the fake has none), and
	// for nothing else.
	for _, c := range be.recorded() {
		if !strings.HasPrefix(c.method, "/grpc.reflection.") {
			t.Errorf("the backend was called: %s", c.method)
		}
	}
}

// TestGrpcurl: grpcurl, with no proto files, lists the gateway's services, describes one and
// calls a CSI method through the gateway, on both transports.
func TestGrpcurl(t *testing.T) {
	bin := testutil.Tool(t, "GRPCURL", "grpcurl")
	onEachTransport(t, func(t *testing.T, tr Transport) {
		ts, _ := startBuiltinHarness(t, tr)
		base := []string{"-plaintext", "-unix", ts.sock}
		if out, code := testutil.RunTool(t, bin, append(base, "list")...); code != 0 || !strings.Contains(out, "csi.v1.Controller\n") || !strings.Contains(out, "volumegroup.Controller\n") {
			t.Errorf("grpcurl list: exit %d\n%s", code, out)
		}
		if out, code := testutil.RunTool(t, bin, append(base, "describe", "csi.v1.Identity")...); code != 0 || !strings.Contains(out, "rpc GetPluginInfo") {
			t.Errorf("grpcurl describe csi.v1.Identity: exit %d\n%s", code, out)
		}
		if out, code := testutil.RunTool(t, bin, append(base, "csi.v1.Identity/GetPluginInfo")...); code != 0 || !strings.Contains(out, `"name": "fake.csi.example.com"`) {
			t.Errorf("grpcurl csi.v1.Identity/GetPluginInfo: exit %d\n%s", code, out)
		}
	})
}

// TestGrpcHealthProbe: grpc_health_probe against a listener answers SERVING, and NOT_SERVING
// (exit status 4) while the backend is down, on both transports.
func TestGrpcHealthProbe(t *testing.T) {
	bin := testutil.Tool(t, "GRPC_HEALTH_PROBE", "grpc_health_probe")
	onEachTransport(t, func(t *testing.T, tr Transport) {
		ts, be := startBuiltinHarness(t, tr)
		addr := "-addr=unix://" + ts.sock
		if out, code := testutil.RunTool(t, bin, addr); code != 0 || !strings.Contains(out, "SERVING") {
			t.Errorf("grpc_health_probe: exit %d, want 0 and SERVING\n%s", code, out)
		}
		if out, code := testutil.RunTool(t, bin, addr, "-service=csi.v1.Node"); code != 0 {
			t.Errorf("grpc_health_probe -service=csi.v1.Node: exit %d, want 0\n%s", code, out)
		}
		be.down.Store(true)
		if out, code := testutil.RunTool(t, bin, addr); code != 4 || !strings.Contains(out, "NOT_SERVING") {
			t.Errorf("grpc_health_probe with the backend down: exit %d, want 4 and NOT_SERVING\n%s", code, out)
		}
	})
}

// TestHealthWatchEndsAtShutdown: a health watch does not hold the graceful stop for the
// grace period: at shutdown it gets NOT_SERVING and UNAVAILABLE, and Shutdown returns well
// before its context ends.
func TestHealthWatchEndsAtShutdown(t *testing.T) { onEachTransport(t, testHealthWatchEndsAtShutdown) }

func testHealthWatchEndsAtShutdown(t *testing.T, tr Transport) {
	ts, _ := startBuiltinHarness(t, tr)
	// The watch may outlive Shutdown's context by far: only the server can end it in time.
	watchCtx, cancelWatch := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelWatch()
	watch, err := healthpb.NewHealthClient(ts.conn).Watch(watchCtx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := watch.Recv(); err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch first = %v, %v; want SERVING", first, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ts.srv.Shutdown(ctx)
	if ctx.Err() != nil {
		t.Fatal("Shutdown waited for its whole context: the health watch held the graceful stop")
	}
	if last, err := watch.Recv(); err != nil || last.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("Watch at shutdown = %v, %v; want NOT_SERVING", last, err)
	}
	if _, err := watch.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("Watch after shutdown: %v, want UNAVAILABLE", err)
	}
}
