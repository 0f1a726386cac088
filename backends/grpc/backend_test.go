package grpcbackend

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

const createVolume = "/csi.v1.Controller/CreateVolume"

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUnaryCreateVolumeMatchesDirectCall(t *testing.T) {
	a, err := embedded.Open(embedded.Config{DataDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := grpc.NewServer()
	a.Register(srv)
	target := serve(t, srv)
	b := newBackend(t, target)

	req := &csi.CreateVolumeRequest{
		Name:          "pvc-1",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
	raw, err := b.Unary(context.Background(), createVolume, mustMarshal(t, req))
	if err != nil {
		t.Fatalf("Unary: %v", err)
	}
	var viaGateway csi.CreateVolumeResponse
	if err := proto.Unmarshal(raw, &viaGateway); err != nil {
		t.Fatal(err)
	}

	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	direct, err := csi.NewControllerClient(conn).CreateVolume(context.Background(), req)
	if err != nil {
		t.Fatalf("direct CreateVolume: %v", err)
	}
	if !proto.Equal(&viaGateway, direct) {
		t.Fatalf("through the backend %v, direct %v", &viaGateway, direct)
	}
	if viaGateway.GetVolume().GetVolumeId() == "" || viaGateway.GetVolume().GetCapacityBytes() != 8<<20 {
		t.Fatalf("unexpected volume %v", viaGateway.GetVolume())
	}
}

func TestUnaryForwardsBytesUnchanged(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)

	req := mustMarshal(t, &csi.CreateVolumeRequest{Name: "pvc-raw", Parameters: map[string]string{"b": "2", "a": "1"}})
	// A field this driver does not know (a newer spec's, say): a proxy that decodes and
	// re-encodes with its own schema could drop or reorder it; the bytes must pass untouched.
	req = protowire.AppendTag(req, 999, protowire.BytesType)
	req = protowire.AppendString(req, "from-the-future")

	resp, err := b.Unary(context.Background(), createVolume, req)
	if err != nil {
		t.Fatal(err)
	}
	got := d.codec.received()
	if len(got) != 1 || !bytes.Equal(got[0], req) {
		t.Fatalf("driver received %x, sent %x", got, req)
	}
	want := mustMarshal(t, &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-pvc-raw"}})
	if !bytes.Equal(resp, want) {
		t.Fatalf("response %x, want %x", resp, want)
	}
}

func TestUnaryMetadataAndDeadlineThroughFront(t *testing.T) {
	d := startDriver(t)
	f := startFront(t, newBackend(t, d.target), true)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-custom", "v1", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	var header, trailer metadata.MD
	resp, err := csi.NewControllerClient(f.conn).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-md"},
		grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetVolume().GetVolumeId() != "vol-pvc-md" {
		t.Fatalf("volume %v", resp.GetVolume())
	}
	md, dl, hasDeadline := d.seen()
	if got := md.Get("x-custom"); len(got) != 1 || got[0] != "v1" {
		t.Errorf("driver got x-custom %q, want [v1]", got)
	}
	if got := md.Get("traceparent"); len(got) != 1 {
		t.Errorf("driver got traceparent %q", got)
	}
	if ua, want := strings.Join(md.Get("user-agent"), ","), "test-caller grpc-go/"+grpc.Version+" "+clientToken(); ua != want {
		t.Errorf("the driver saw user-agent %q, want the caller's then the backend's client's token: %q", ua, want)
	}
	if !hasDeadline {
		t.Error("the driver saw no deadline")
	} else if left := time.Until(dl); left <= 0 || left > 30*time.Second {
		t.Errorf("driver deadline %v from now, want within the caller's 30s", left)
	}
	if got := header.Get("x-driver-header"); len(got) != 1 || got[0] != "h1" {
		t.Errorf("caller got header x-driver-header %q, want [h1]", got)
	}
	if got := trailer.Get("x-driver-trailer"); len(got) != 1 || got[0] != "t1" {
		t.Errorf("caller got trailer x-driver-trailer %q, want [t1]", got)
	}
}

func TestUnaryStatusCodes(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)

	tests := []struct {
		code  codes.Code
		class backends.Class
	}{
		{codes.Canceled, backends.ClassCanceled},
		{codes.Unknown, backends.ClassInternal},
		{codes.InvalidArgument, backends.ClassInvalid},
		{codes.DeadlineExceeded, backends.ClassDeadline},
		{codes.NotFound, backends.ClassNotFound},
		{codes.AlreadyExists, backends.ClassAlreadyExists},
		{codes.PermissionDenied, backends.ClassPermission},
		{codes.ResourceExhausted, backends.ClassExhausted},
		{codes.FailedPrecondition, backends.ClassPrecondition},
		{codes.Aborted, backends.ClassAborted},
		{codes.OutOfRange, backends.ClassOutOfRange},
		{codes.Unimplemented, backends.ClassUnimplemented},
		{codes.Internal, backends.ClassInternal},
		{codes.Unavailable, backends.ClassUnavailable},
		{codes.DataLoss, backends.ClassInternal},
		{codes.Unauthenticated, backends.ClassUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			req := mustMarshal(t, &csi.CreateVolumeRequest{Name: fmt.Sprintf("code-%d", tt.code)})
			_, err := b.Unary(context.Background(), createVolume, req)
			be := asBackendError(t, err)
			if be.Class != tt.class {
				t.Errorf("class %v, want %v", be.Class, tt.class)
			}
			if want := fmt.Sprintf("backend \"drv\": driver says %s", tt.code); be.Message != want {
				t.Errorf("message %q, want %q", be.Message, want)
			}
			if status.Code(be.Cause) != tt.code {
				t.Errorf("cause %v, want code %v", be.Cause, tt.code)
			}
		})
	}
}

func TestUnaryUnimplementedMethod(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	_, err := b.Unary(context.Background(), "/csi.v1.Controller/ListVolumes", nil)
	be := asBackendError(t, err)
	if be.Class != backends.ClassUnimplemented || !strings.HasPrefix(be.Message, `backend "drv": `) {
		t.Fatalf("got %v %q", be.Class, be.Message)
	}
}

func TestUnaryDriverDown(t *testing.T) {
	target := "unix://" + socketPath(t, "missing.sock")
	b := newBackend(t, target)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.Unary(ctx, createVolume, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v; a missing socket must fail fast", took)
	}
	be := asBackendError(t, err)
	if be.Class != backends.ClassUnavailable {
		t.Errorf("class %v, want unavailable", be.Class)
	}
	wantPrefix := fmt.Sprintf("backend \"drv\": cannot reach the driver at %s (", target)
	wantSuffix := "); is the driver running? check backends.drv.target"
	if !strings.HasPrefix(be.Message, wantPrefix) || !strings.HasSuffix(be.Message, wantSuffix) {
		t.Errorf("message %q, want %q…%q", be.Message, wantPrefix, wantSuffix)
	}
}

func TestUnaryCallerEnds(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	req := mustMarshal(t, &csi.CreateVolumeRequest{Name: "slow"})

	tests := []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		class backends.Class
		msg   string
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, backends.ClassDeadline, `backend "drv": no answer from the driver within the deadline`},
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}, backends.ClassCanceled, `backend "drv": the caller canceled the call`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err := b.Unary(ctx, createVolume, req)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			be := asBackendError(t, err)
			if be.Class != tt.class || be.Message != tt.msg {
				t.Errorf("got %v %q, want %v %q", be.Class, be.Message, tt.class, tt.msg)
			}
		})
	}
}

func TestAttemptsCounted(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	ctx, ci := backends.WithCallInfo(context.Background())
	if _, err := b.Unary(ctx, createVolume, mustMarshal(t, &csi.CreateVolumeRequest{Name: "a"})); err != nil {
		t.Fatal(err)
	}
	if got := ci.Attempts(); got != 1 {
		t.Fatalf("attempts %d, want 1", got)
	}
}

func TestReady(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("ready driver: %v", err)
	}

	d.notReady.Store(true)
	be := asBackendError(t, b.Ready(context.Background()))
	want := fmt.Sprintf("backend \"drv\": Identity/Probe: the driver at %s reports ready=false (still starting up?)", d.target)
	if be.Class != backends.ClassUnavailable || be.Message != want {
		t.Errorf("not ready: got %v %q, want unavailable %q", be.Class, be.Message, want)
	}

	down := newBackend(t, "unix://"+socketPath(t, "missing.sock"))
	be = asBackendError(t, down.Ready(context.Background()))
	if be.Class != backends.ClassUnavailable || !strings.HasPrefix(be.Message, `backend "drv": Identity/Probe: cannot reach the driver at `) {
		t.Errorf("driver down: got %v %q", be.Class, be.Message)
	}

	// A driver without Identity: Probe is unimplemented.
	bare := grpc.NewServer()
	noIdentity := newBackend(t, serve(t, bare))
	be = asBackendError(t, noIdentity.Ready(context.Background()))
	if be.Class != backends.ClassUnimplemented || !strings.HasPrefix(be.Message, `backend "drv": Identity/Probe: `) {
		t.Errorf("no identity: got %v %q", be.Class, be.Message)
	}
}

func TestReadyTimeout(t *testing.T) {
	// A server that never answers: its only handler blocks until the call ends.
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, s grpc.ServerStream) error {
		<-s.Context().Done()
		return s.Context().Err()
	}))
	b := newBackend(t, serve(t, srv), WithReadyTimeout(100*time.Millisecond))
	start := time.Now()
	be := asBackendError(t, b.Ready(context.Background()))
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v, want about the 100ms ready timeout", took)
	}
	if be.Class != backends.ClassDeadline {
		t.Errorf("got %v %q, want deadline", be.Class, be.Message)
	}
}

func TestClose(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	want := `backend "drv": the backend is closed (the gateway is shutting down or reloading)`
	for name, err := range map[string]error{
		"unary":  func() error { _, err := b.Unary(context.Background(), createVolume, nil); return err }(),
		"stream": b.Stream(context.Background(), createVolume, nil),
		"ready":  b.Ready(context.Background()),
	} {
		be := asBackendError(t, err)
		if be.Class != backends.ClassUnavailable || be.Message != want {
			t.Errorf("%s after Close: got %v %q", name, be.Class, be.Message)
		}
	}
}

func TestCloseCutsCallsInFlight(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	errc := make(chan error, 1)
	go func() {
		_, err := b.Unary(context.Background(), createVolume, mustMarshal(t, &csi.CreateVolumeRequest{Name: "slow"}))
		errc <- err
	}()
	// Wait until the call has reached the driver.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if md, _, _ := d.seen(); md != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never reached the driver")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = b.Close()
	be := asBackendError(t, <-errc)
	if be.Class != backends.ClassUnavailable {
		t.Fatalf("got %v %q, want unavailable", be.Class, be.Message)
	}
}
