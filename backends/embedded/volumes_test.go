package embedded

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func TestCreateVolumeBadInput(t *testing.T) {
	a := openTest(t, Config{MaxVolumeBytes: 1 << 30, DefaultVolumeBytes: 1 << 20})
	c := &controllerServer{a: a}
	ctx := context.Background()
	tests := []struct {
		name      string
		req       *csi.CreateVolumeRequest
		code      codes.Code
		fragments []string
	}{
		{"no name", &csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{rwo}}, codes.InvalidArgument, []string{"name is required"}},
		{"name over 128 bytes", &csi.CreateVolumeRequest{Name: strings.Repeat("n", 129), VolumeCapabilities: []*csi.VolumeCapability{rwo}}, codes.InvalidArgument, []string{"129 bytes", "at most 128"}},
		{"control character", &csi.CreateVolumeRequest{Name: "a\x01b", VolumeCapabilities: []*csi.VolumeCapability{rwo}}, codes.InvalidArgument, []string{"U+0001"}},
		{"no capabilities", &csi.CreateVolumeRequest{Name: "v"}, codes.InvalidArgument, []string{"volume_capabilities is required"}},
		{"no access mode", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{{AccessType: rwo.AccessType}}}, codes.InvalidArgument, []string{"access_mode is required"}},
		{"no access type", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{{AccessMode: rwo.AccessMode}}}, codes.InvalidArgument, []string{"set block or mount"}},
		{"multi-node writer", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}}, codes.InvalidArgument, []string{"MULTI_NODE_MULTI_WRITER"}},
		{"xfs", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{{AccessMode: rwo.AccessMode, AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "xfs"}}}}}, codes.InvalidArgument, []string{"xfs", "ext4"}},
		{"required above limit", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20, LimitBytes: 1 << 20}}, codes.InvalidArgument, []string{"exceeds limit_bytes"}},
		{"negative", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: -1}}, codes.InvalidArgument, []string{"must not be negative"}},
		{"larger than the maximum", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}}, codes.OutOfRange, []string{"at most 1073741824"}},
		{"unknown parameter", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, Parameters: map[string]string{"colour": "red"}}, codes.InvalidArgument, []string{`"colour"`, "tier"}},
		{"bad tier", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, Parameters: map[string]string{"tier": "gold"}}, codes.InvalidArgument, []string{"gold"}},
		{"unknown source snapshot", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-nope"}}}}, codes.NotFound, []string{"snap-nope"}},
		{"unknown source volume", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "vol-nope"}}}}, codes.NotFound, []string{"vol-nope"}},
		{"other zone", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{TopologyZoneKey: "zone-9"}}}}}, codes.ResourceExhausted, []string{"zone-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CreateVolume(ctx, tt.req)
			wantCode(t, err, tt.code, tt.fragments...)
		})
	}
	entries, _ := os.ReadDir(a.images.volumesDir)
	if len(entries) != 0 {
		t.Errorf("refused creates left %d files behind", len(entries))
	}
}

func TestCreateVolumeIdempotency(t *testing.T) {
	a := openTest(t, Config{})
	c := &controllerServer{a: a}
	ctx := context.Background()
	req := &csi.CreateVolumeRequest{Name: "db", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 10 << 20}, Parameters: map[string]string{"tier": "premium"}}
	first, err := c.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateVolume(ctx, req)
	if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
		t.Fatalf("same request again: %v, id %s, want %s", err, again.GetVolume().GetVolumeId(), first.GetVolume().GetVolumeId())
	}
	bigger := &csi.CreateVolumeRequest{Name: "db", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 20 << 20}, Parameters: req.Parameters}
	_, err = c.CreateVolume(ctx, bigger)
	wantCode(t, err, codes.AlreadyExists, "db", "capacity_range")
	other := &csi.CreateVolumeRequest{Name: "db", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: req.CapacityRange, Parameters: map[string]string{"tier": "standard"}}
	_, err = c.CreateVolume(ctx, other)
	wantCode(t, err, codes.AlreadyExists, "parameters")
	if got := first.GetVolume().GetCapacityBytes(); got != 10<<20 {
		t.Errorf("capacity %d, want %d", got, 10<<20)
	}
}

func TestCapacityIsAQuota(t *testing.T) {
	a := openTest(t, Config{CapacityBytes: 100 << 20})
	c := &controllerServer{a: a}
	ctx := context.Background()
	if _, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "a", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 60 << 20}}); err != nil {
		t.Fatal(err)
	}
	capResp, err := c.GetCapacity(ctx, &csi.GetCapacityRequest{})
	if err != nil || capResp.GetAvailableCapacity() != 40<<20 {
		t.Fatalf("GetCapacity: %v %d, want %d", err, capResp.GetAvailableCapacity(), 40<<20)
	}
	_, err = c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "b", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 60 << 20}})
	wantCode(t, err, codes.ResourceExhausted, "41943040 bytes left")
}

func TestUnknownIDs(t *testing.T) {
	a := openTest(t, Config{})
	c := &controllerServer{a: a}
	ctx := context.Background()
	_, err := c.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "vol-missing"})
	wantCode(t, err, codes.NotFound, "vol-missing")
	_, err = c.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-missing", VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.NotFound)
	_, err = c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "vol-missing", CapacityRange: &csi.CapacityRange{RequiredBytes: 1}})
	wantCode(t, err, codes.NotFound)
	_, err = c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "vol-missing", NodeId: "node-1", VolumeCapability: rwo})
	wantCode(t, err, codes.NotFound)
	_, err = c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: "snap-missing"})
	wantCode(t, err, codes.NotFound)
	_, err = c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: "vol-missing"})
	wantCode(t, err, codes.NotFound)
	// Deletes and unpublishes of what does not exist succeed: the spec's idempotency.
	for name, call := range map[string]func() error{
		"DeleteVolume": func() error {
			_, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-missing"})
			return err
		},
		"DeleteSnapshot": func() error {
			_, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snap-missing"})
			return err
		},
		"ControllerUnpublishVolume": func() error {
			_, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-missing", NodeId: "node-1"})
			return err
		},
	} {
		if err := call(); err != nil {
			t.Errorf("%s of a missing object: %v, want OK", name, err)
		}
	}
}

func TestPublishRules(t *testing.T) {
	a := openTest(t, Config{KnownNodes: []string{"node-2"}, MaxVolumesPerNode: 2})
	c := &controllerServer{a: a}
	ctx := context.Background()
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	pub := func(node string, vc *csi.VolumeCapability, ro bool) error {
		_, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: vc, Readonly: ro})
		return err
	}
	if err := pub("node-1", rwo, false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, pub("node-1", rwo, false), codes.OK)
	wantCode(t, pub("node-1", rwo, true), codes.AlreadyExists, "readonly=false")
	wantCode(t, pub("node-2", rwo, false), codes.FailedPrecondition, "node-1")
	wantCode(t, pub("node-9", rwo, false), codes.NotFound, "node-9")
	wantCode(t, pub("", rwo, false), codes.InvalidArgument, "node_id")
	wantCode(t, pub("node-1", nil, false), codes.InvalidArgument, "volume_capability")
	_, err = c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	wantCode(t, err, codes.FailedPrecondition, "node-1")

	got, err := c.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
	if err != nil || len(got.GetStatus().GetPublishedNodeIds()) != 1 {
		t.Fatalf("ControllerGetVolume: %v %v", err, got.GetStatus())
	}
	if _, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, pub("node-2", rwo, false), codes.OK)

	// Reader-only volumes may be published to several nodes; the per-node limit holds.
	rox := mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)
	for _, name := range []string{"r1", "r2"} {
		v, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{rox}})
		if err != nil {
			t.Fatal(err)
		}
		id = v.GetVolume().GetVolumeId()
		wantCode(t, pub("node-1", rox, true), codes.OK)
		if name == "r1" {
			wantCode(t, pub("node-2", rox, true), codes.OK)
		} else {
			wantCode(t, pub("node-2", rox, true), codes.ResourceExhausted, "node-2")
		}
	}
}

func TestExpandAndModify(t *testing.T) {
	a := openTest(t, Config{})
	c := &controllerServer{a: a}
	ctx := context.Background()
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	resp, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 20 << 20}})
	if err != nil || resp.GetCapacityBytes() != 20<<20 || !resp.GetNodeExpansionRequired() {
		t.Fatalf("expand: %v %v", err, resp)
	}
	if fi, err := os.Stat(a.images.volumePath(id)); err != nil || fi.Size() != 20<<20 {
		t.Fatalf("image after expand: %v %v", err, fi)
	}
	_, err = c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20, LimitBytes: 4 << 20}})
	wantCode(t, err, codes.OutOfRange, "cannot shrink")
	_, err = c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id})
	wantCode(t, err, codes.InvalidArgument, "capacity_range is required")

	_, err = c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id, MutableParameters: map[string]string{"iops": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id, MutableParameters: map[string]string{"size": "big"}})
	wantCode(t, err, codes.InvalidArgument, `"size"`)
	_, err = c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: "vol-missing", MutableParameters: map[string]string{"iops": "5"}})
	wantCode(t, err, codes.NotFound)
	a.view(func(s *state) error {
		if got := s.Volumes[id].MutableParameters["iops"]; got != "500" {
			t.Errorf("iops = %q after modify, want 500", got)
		}
		return nil
	})
}
