package translate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	grpcbackend "github.com/csi-gateway/csi-gateway/backends/grpc"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// call sends req to b as method and decodes the answer into resp.
func call(t *testing.T, b *Backend, method string, req, resp proto.Message) error {
	t.Helper()
	wire, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Unary(context.Background(), method, wire)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(raw, resp); err != nil {
		t.Fatalf("%s: the answer does not decode as %T: %v", method, resp, err)
	}
	return nil
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	got := codes.OK
	if err != nil {
		got = backends.ClassOf(err).Code()
	}
	if got != want {
		t.Fatalf("%s: code %v (%v), want %v", what, got, err, want)
	}
}

// TestAutoDetectsV0Driver: with csiVersion auto, a v1 call the v0 driver answers UNIMPLEMENTED
// makes the gateway ask the driver once (v1 GetPluginInfo, then v0's) and send the call again,
// translated; concurrent first calls share the one detection; later calls go translated at
// once.
func TestAutoDetectsV0Driver(t *testing.T) {
	d := &v0Driver{caps: []csiv0.ControllerServiceCapability_RPC_Type{csiv0.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}}
	b := New("legacy", d.serve(t), Auto)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var resp csi.ControllerGetCapabilitiesResponse
			if err := call(t, b, "/csi.v1.Controller/ControllerGetCapabilities", &csi.ControllerGetCapabilitiesRequest{}, &resp); err != nil {
				t.Error(err)
			}
			if len(resp.GetCapabilities()) != 1 {
				t.Errorf("capabilities %v, want CREATE_DELETE_VOLUME", resp.GetCapabilities())
			}
		})
	}
	wg.Wait()
	if got := len(d.requests("GetPluginInfo")); got != 1 {
		t.Errorf("the driver was asked its v0 GetPluginInfo %d times, want once", got)
	}
	if b.speaks.get() != V0 {
		t.Errorf("detected %q, want v0", b.speaks.get())
	}
	before := len(d.calls())
	var resp csi.GetPluginInfoResponse
	if err := call(t, b, "/csi.v1.Identity/GetPluginInfo", &csi.GetPluginInfoRequest{}, &resp); err != nil {
		t.Fatal(err)
	}
	if got := d.calls()[before:]; !slices.Equal(got, []string{"/csi.v0.Identity/GetPluginInfo"}) {
		t.Errorf("after detection a v1 call reached the driver as %v, want the v0 call only", got)
	}
	if resp.GetName() != "v0.example.com" || resp.GetManifest()["k"] != "v" {
		t.Errorf("plugin info %v", &resp)
	}
}

// TestAutoPassesV0CallsToV0Driver: a v0 caller in front of a v0 driver is never translated
// and costs the driver no call of the gateway's own.
func TestAutoPassesV0CallsToV0Driver(t *testing.T) {
	d := &v0Driver{}
	b := New("legacy", d.serve(t), Auto)
	var resp csiv0.NodeGetIdResponse
	if err := call(t, b, "/csi.v0.Node/NodeGetId", &csiv0.NodeGetIdRequest{}, &resp); err != nil {
		t.Fatal(err)
	}
	if got := d.calls(); !slices.Equal(got, []string{"/csi.v0.Node/NodeGetId"}) {
		t.Errorf("the driver got %v, want the caller's call only", got)
	}
}

// TestV1OnlyRPCsUnimplemented: a v1 RPC v0 has no equivalent of never reaches a v0 driver.
func TestV1OnlyRPCsUnimplemented(t *testing.T) {
	d := &v0Driver{}
	b := New("legacy", d.serve(t), V0)
	for _, m := range []string{"/csi.v1.Controller/ControllerExpandVolume", "/csi.v1.Node/NodeExpandVolume",
		"/csi.v1.Node/NodeGetVolumeStats", "/csi.v1.Controller/ControllerGetVolume", "/csi.v1.Controller/ControllerModifyVolume",
		"/csi.v1.GroupController/CreateVolumeGroupSnapshot"} {
		_, err := b.Unary(context.Background(), m, nil)
		wantCode(t, m, err, codes.Unimplemented)
		if !strings.Contains(err.Error(), `backend "legacy"`) || !strings.Contains(err.Error(), m) {
			t.Errorf("%s: message %q does not name the backend and the method", m, err)
		}
	}
	if got := d.calls(); len(got) != 0 {
		t.Errorf("the driver got %v", got)
	}
}

// TestNodeGetInfoFromNodeGetId: a v0.2 driver has no NodeGetInfo; v1's is answered from
// NodeGetId. A v0.3 driver's NodeGetInfo is used as it is.
func TestNodeGetInfoFromNodeGetId(t *testing.T) {
	for _, v02 := range []bool{true, false} {
		d := &v0Driver{v02: v02}
		b := New("legacy", d.serve(t), V0)
		var resp csi.NodeGetInfoResponse
		if err := call(t, b, "/csi.v1.Node/NodeGetInfo", &csi.NodeGetInfoRequest{}, &resp); err != nil {
			t.Fatal(err)
		}
		want := &csi.NodeGetInfoResponse{NodeId: "node-from-getid"}
		if !v02 {
			want = &csi.NodeGetInfoResponse{NodeId: "node-1", MaxVolumesPerNode: 8, AccessibleTopology: &csi.Topology{Segments: map[string]string{"zone": "a"}}}
		}
		if !proto.Equal(&resp, want) {
			t.Errorf("v0.2 %v: NodeGetInfo %v, want %v", v02, &resp, want)
		}
	}
}

// TestReadyProbesV0Driver: a v0 driver is ready by its v0 Probe; ready=false is not ready.
func TestReadyProbesV0Driver(t *testing.T) {
	for _, auto := range []bool{false, true} {
		d := &v0Driver{}
		version := V0
		if auto {
			version = Auto
		}
		b := New("legacy", d.serve(t), version)
		if err := b.Ready(context.Background()); err != nil {
			t.Errorf("auto %v: Ready: %v", auto, err)
		}
		d.mu.Lock()
		d.notReady = true
		d.mu.Unlock()
		if err := b.Ready(context.Background()); backends.ClassOf(err) != backends.ClassUnavailable || !strings.Contains(err.Error(), "ready=false") {
			t.Errorf("auto %v: Ready of a driver that says ready=false: %v", auto, err)
		}
	}
}

// TestControllerUnpublishNotFoundIsOK: v0's ControllerUnpublishVolume NOT_FOUND (the volume
// or node does not exist) is v1's OK; other failures pass.
func TestControllerUnpublishNotFoundIsOK(t *testing.T) {
	d := &v0Driver{fail: map[string]error{"ControllerUnpublishVolume": status.Error(codes.NotFound, "vol-1")}}
	b := New("legacy", d.serve(t), V0)
	req := &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1", Secrets: map[string]string{"k": "s"}}
	wire, _ := proto.Marshal(req)
	ctx, ci := backends.WithCallInfo(context.Background())
	if _, err := b.Unary(ctx, "/csi.v1.Controller/ControllerUnpublishVolume", wire); err != nil {
		t.Fatalf("NOT_FOUND: %v, want OK", err)
	}
	if a := ci.AnsweredOtherwise(); a == nil || a.Code != codes.NotFound || a.Message != "vol-1" {
		t.Errorf("the driver's own answer noted on the call: %+v, want NOT_FOUND \"vol-1\"", a)
	}
	got := d.requests("ControllerUnpublishVolume")[0].(*csiv0.ControllerUnpublishVolumeRequest)
	if got.GetControllerUnpublishSecrets()["k"] != "s" || got.GetNodeId() != "node-1" {
		t.Errorf("the driver got %v", got)
	}
	d.fail["ControllerUnpublishVolume"] = status.Error(codes.Aborted, "busy")
	err := call(t, b, "/csi.v1.Controller/ControllerUnpublishVolume", req, &csi.ControllerUnpublishVolumeResponse{})
	wantCode(t, "ABORTED", err, codes.Aborted)
}

// TestCreateSnapshotErrorUploading: a snapshot the v0 driver reports failed is a failed call
// in v1 (which has no failed state), never a snapshot that is just not ready.
func TestCreateSnapshotErrorUploading(t *testing.T) {
	d := &v0Driver{snapshot: &csiv0.SnapshotStatus{Type: csiv0.SnapshotStatus_ERROR_UPLOADING, Details: "bucket gone"}}
	b := New("legacy", d.serve(t), V0)
	err := call(t, b, "/csi.v1.Controller/CreateSnapshot", &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: "vol-1"}, &csi.CreateSnapshotResponse{})
	wantCode(t, "ERROR_UPLOADING", err, codes.Internal)
	if !strings.Contains(err.Error(), "bucket gone") {
		t.Errorf("message %q lacks the driver's details", err)
	}
	d.snapshot = &csiv0.SnapshotStatus{Type: csiv0.SnapshotStatus_UPLOADING}
	var resp csi.CreateSnapshotResponse
	if err := call(t, b, "/csi.v1.Controller/CreateSnapshot", &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: "vol-1"}, &resp); err != nil {
		t.Fatal(err)
	}
	want := &csi.Snapshot{SnapshotId: "snap-s", SourceVolumeId: "vol-1", SizeBytes: 4096, ReadyToUse: false}
	if s := resp.GetSnapshot(); s.GetReadyToUse() || s.GetCreationTime().AsTime().UnixNano() != 1_700_000_000_123_456_789 ||
		!proto.Equal(&csi.Snapshot{SnapshotId: s.GetSnapshotId(), SourceVolumeId: s.GetSourceVolumeId(), SizeBytes: s.GetSizeBytes()}, want) {
		t.Errorf("snapshot %v", s)
	}
}

// TestTargetPathForV0Driver: the gateway creates a v1 NodePublishVolume's target path for a
// v0 driver (a directory, or a file for a block volume) and removes it after the unpublish;
// it never removes a path it did not create.
func TestTargetPathForV0Driver(t *testing.T) {
	d := &v0Driver{}
	b := New("legacy", d.serve(t), V0)
	dir := t.TempDir()
	for _, block := range []bool{false, true} {
		target := filepath.Join(dir, "target")
		c := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
		if block {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		}
		pub := &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: target, VolumeCapability: c, Secrets: map[string]string{"k": "s"}}
		if err := call(t, b, "/csi.v1.Node/NodePublishVolume", pub, &csi.NodePublishVolumeResponse{}); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(target)
		if err != nil || info.IsDir() == block {
			t.Fatalf("block %v: target path after publish: %v, %v", block, info, err)
		}
		if err := call(t, b, "/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target},
			&csi.NodeUnpublishVolumeResponse{}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("block %v: target path after unpublish: %v, want removed", block, err)
		}
	}
	kept := filepath.Join(dir, "not-ours")
	if err := os.WriteFile(kept, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := call(t, b, "/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: kept},
		&csi.NodeUnpublishVolumeResponse{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a file the gateway did not create was removed: %v", err)
	}
	hidden := filepath.Join(dir, "no-such-parent", "target") // a parent the gateway cannot see
	if err := call(t, b, "/csi.v1.Node/NodePublishVolume", &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: hidden,
		VolumeCapability: &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}},
		&csi.NodePublishVolumeResponse{}); err != nil {
		t.Errorf("a target path whose parent the gateway cannot see: %v, want it left to the driver", err)
	}
	got := d.requests("NodePublishVolume")[0].(*csiv0.NodePublishVolumeRequest)
	if got.GetNodePublishSecrets()["k"] != "s" || got.GetVolumeCapability().GetMount() == nil {
		t.Errorf("the driver got %v", got)
	}
}

// TestAutoUnreachableDecidesNothing: a driver that cannot be reached answers UNAVAILABLE as
// it is, and the version stays unknown, to be found out by a later call.
func TestAutoUnreachableDecidesNothing(t *testing.T) {
	be, err := grpcbackend.New("gone", grpcbackend.Config{Target: "unix://" + filepath.Join(t.TempDir(), "nobody.sock")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	b := New("gone", be, Auto)
	_, err = b.Unary(context.Background(), "/csi.v1.Identity/Probe", nil)
	wantCode(t, "an unreachable driver", err, codes.Unavailable)
	if err := b.Ready(context.Background()); backends.ClassOf(err) != backends.ClassUnavailable {
		t.Errorf("Ready of an unreachable driver: %v", err)
	}
	if v := b.speaks.get(); v != Auto {
		t.Errorf("an unreachable driver was found to speak %q", v)
	}
}
