package translate

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	grpcbackend "github.com/csi-gateway/csi-gateway/backends/grpc"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// v0Driver is a CSI v0 driver served on a Unix socket with the generated stubs: it records
// the requests it gets and answers as its fields say. A v0.2 driver has no NodeGetInfo.
type v0Driver struct {
	csiv0.UnimplementedIdentityServer
	csiv0.UnimplementedControllerServer
	csiv0.UnimplementedNodeServer

	v02      bool                  // no NodeGetInfo (UNIMPLEMENTED), as a v0.2 driver
	notReady bool                  // Probe says ready=false
	fail     map[string]error      // by short method name: the status to answer with
	snapshot *csiv0.SnapshotStatus // CreateSnapshot's status (nil: READY)
	caps     []csiv0.ControllerServiceCapability_RPC_Type

	mu   sync.Mutex
	got  map[string][]any // requests by short method name, of the methods it implements
	seen []string         // every full method called, in order
	sent []proto.Message  // every request, in order, implemented or not
}

func (d *v0Driver) record(method string, req any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.got == nil {
		d.got = map[string][]any{}
	}
	d.got[method] = append(d.got[method], req)
	return d.fail[method]
}

func (d *v0Driver) requests(method string) []any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]any(nil), d.got[method]...)
}

func (d *v0Driver) GetPluginInfo(_ context.Context, r *csiv0.GetPluginInfoRequest) (*csiv0.GetPluginInfoResponse, error) {
	if err := d.record("GetPluginInfo", r); err != nil {
		return nil, err
	}
	return &csiv0.GetPluginInfoResponse{Name: "v0.example.com", VendorVersion: "0.3.0", Manifest: map[string]string{"k": "v"}}, nil
}

func (d *v0Driver) GetPluginCapabilities(_ context.Context, r *csiv0.GetPluginCapabilitiesRequest) (*csiv0.GetPluginCapabilitiesResponse, error) {
	d.record("GetPluginCapabilities", r)
	return &csiv0.GetPluginCapabilitiesResponse{Capabilities: []*csiv0.PluginCapability{
		{Type: &csiv0.PluginCapability_Service_{Service: &csiv0.PluginCapability_Service{Type: csiv0.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csiv0.PluginCapability_Service_{Service: &csiv0.PluginCapability_Service{Type: csiv0.PluginCapability_Service_ACCESSIBILITY_CONSTRAINTS}}},
		{Type: &csiv0.PluginCapability_Service_{Service: &csiv0.PluginCapability_Service{Type: 7}}}, // not in v0: dropped
	}}, nil
}

func (d *v0Driver) Probe(_ context.Context, r *csiv0.ProbeRequest) (*csiv0.ProbeResponse, error) {
	d.record("Probe", r)
	return &csiv0.ProbeResponse{Ready: wrapperspb.Bool(!d.notReady)}, nil
}

func (d *v0Driver) CreateVolume(_ context.Context, r *csiv0.CreateVolumeRequest) (*csiv0.CreateVolumeResponse, error) {
	if err := d.record("CreateVolume", r); err != nil {
		return nil, err
	}
	return &csiv0.CreateVolumeResponse{Volume: &csiv0.Volume{Id: "vol-" + r.GetName(), CapacityBytes: r.GetCapacityRange().GetRequiredBytes(),
		Attributes: map[string]string{"a": "b"}, ContentSource: r.GetVolumeContentSource(),
		AccessibleTopology: r.GetAccessibilityRequirements().GetPreferred()}}, nil
}

func (d *v0Driver) ControllerUnpublishVolume(_ context.Context, r *csiv0.ControllerUnpublishVolumeRequest) (*csiv0.ControllerUnpublishVolumeResponse, error) {
	if err := d.record("ControllerUnpublishVolume", r); err != nil {
		return nil, err
	}
	return &csiv0.ControllerUnpublishVolumeResponse{}, nil
}

func (d *v0Driver) ValidateVolumeCapabilities(_ context.Context, r *csiv0.ValidateVolumeCapabilitiesRequest) (*csiv0.ValidateVolumeCapabilitiesResponse, error) {
	d.record("ValidateVolumeCapabilities", r)
	return &csiv0.ValidateVolumeCapabilitiesResponse{Supported: r.GetVolumeAttributes()["supported"] == "yes", Message: "checked"}, nil
}

func (d *v0Driver) ControllerGetCapabilities(_ context.Context, r *csiv0.ControllerGetCapabilitiesRequest) (*csiv0.ControllerGetCapabilitiesResponse, error) {
	d.record("ControllerGetCapabilities", r)
	out := &csiv0.ControllerGetCapabilitiesResponse{}
	for _, c := range d.caps {
		out.Capabilities = append(out.Capabilities, &csiv0.ControllerServiceCapability{Type: &csiv0.ControllerServiceCapability_Rpc{
			Rpc: &csiv0.ControllerServiceCapability_RPC{Type: c}}})
	}
	return out, nil
}

func (d *v0Driver) CreateSnapshot(_ context.Context, r *csiv0.CreateSnapshotRequest) (*csiv0.CreateSnapshotResponse, error) {
	d.record("CreateSnapshot", r)
	st := d.snapshot
	if st == nil {
		st = &csiv0.SnapshotStatus{Type: csiv0.SnapshotStatus_READY}
	}
	return &csiv0.CreateSnapshotResponse{Snapshot: &csiv0.Snapshot{Id: "snap-" + r.GetName(), SourceVolumeId: r.GetSourceVolumeId(),
		SizeBytes: 4096, CreatedAt: 1_700_000_000_123_456_789, Status: st}}, nil
}

func (d *v0Driver) NodePublishVolume(_ context.Context, r *csiv0.NodePublishVolumeRequest) (*csiv0.NodePublishVolumeResponse, error) {
	if err := d.record("NodePublishVolume", r); err != nil {
		return nil, err
	}
	return &csiv0.NodePublishVolumeResponse{}, nil
}

func (d *v0Driver) NodeUnpublishVolume(_ context.Context, r *csiv0.NodeUnpublishVolumeRequest) (*csiv0.NodeUnpublishVolumeResponse, error) {
	if err := d.record("NodeUnpublishVolume", r); err != nil {
		return nil, err
	}
	return &csiv0.NodeUnpublishVolumeResponse{}, nil
}

func (d *v0Driver) NodeGetId(_ context.Context, r *csiv0.NodeGetIdRequest) (*csiv0.NodeGetIdResponse, error) {
	d.record("NodeGetId", r)
	return &csiv0.NodeGetIdResponse{NodeId: "node-from-getid"}, nil
}

func (d *v0Driver) NodeGetInfo(_ context.Context, r *csiv0.NodeGetInfoRequest) (*csiv0.NodeGetInfoResponse, error) {
	d.record("NodeGetInfo", r)
	if d.v02 {
		return nil, status.Error(codes.Unimplemented, "unknown method NodeGetInfo for service csi.v0.Node")
	}
	return &csiv0.NodeGetInfoResponse{NodeId: "node-1", MaxVolumesPerNode: 8,
		AccessibleTopology: &csiv0.Topology{Segments: map[string]string{"zone": "a"}}}, nil
}

// serve starts d on a Unix socket and returns a grpc backend that reaches it, closed when
// the test ends.
func (d *v0Driver) serve(t *testing.T) backends.Backend {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "v0.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		d.mu.Lock()
		d.seen = append(d.seen, info.FullMethod)
		d.sent = append(d.sent, req.(proto.Message))
		d.mu.Unlock()
		return h(ctx, req)
	}))
	csiv0.RegisterIdentityServer(srv, d)
	csiv0.RegisterControllerServer(srv, d)
	csiv0.RegisterNodeServer(srv, d)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	be, err := grpcbackend.New("legacy", grpcbackend.Config{Target: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// lastRequest returns the last request the driver got, of any method.
func (d *v0Driver) lastRequest() proto.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.sent) == 0 {
		return nil
	}
	return d.sent[len(d.sent)-1]
}

// calls returns every full method the driver was called with, in order.
func (d *v0Driver) calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

// openAppliance opens the embedded appliance in a temporary directory: a v1 backend.
func openAppliance(t *testing.T) backends.Backend {
	t.Helper()
	app, err := embedded.OpenBackend("app", embedded.Config{DataDir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	return app
}
