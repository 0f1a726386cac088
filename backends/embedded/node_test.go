package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestNodeGetCapabilities(t *testing.T) {
	a := openTest(t, Config{})
	resp, err := a.node.NodeGetCapabilities(bgCtx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []csi.NodeServiceCapability_RPC_Type
	for _, c := range resp.GetCapabilities() {
		got = append(got, c.GetRpc().GetType())
	}
	want := []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("capabilities %v, want %v", got, want)
	}
}

func TestNodeGetInfo(t *testing.T) {
	a := openTest(t, Config{NodeID: "node-7", Zone: "zone-b", MaxVolumesPerNode: 12})
	resp, err := a.node.NodeGetInfo(bgCtx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetNodeId() != "node-7" || resp.GetMaxVolumesPerNode() != 12 {
		t.Fatalf("got node %q with at most %d volumes, want node-7 with 12", resp.GetNodeId(), resp.GetMaxVolumesPerNode())
	}
	if z := resp.GetAccessibleTopology().GetSegments()[TopologyZoneKey]; z != "zone-b" {
		t.Fatalf("zone %q, want zone-b", z)
	}
}

// TestNodeInvalidArguments covers the requests that fail before anything is looked up, so
// they need neither root nor an existing volume.
func TestNodeInvalidArguments(t *testing.T) {
	n := openTest(t, Config{}).node
	mount := mountCap(snw)
	abs := "/somewhere"
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"stage without volume_id", func() error {
			_, err := n.NodeStageVolume(bgCtx, &csi.NodeStageVolumeRequest{StagingTargetPath: abs, VolumeCapability: mount})
			return err
		}, "volume_id is required"},
		{"stage without staging_target_path", func() error {
			_, err := n.NodeStageVolume(bgCtx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", VolumeCapability: mount})
			return err
		}, "staging_target_path is required"},
		{"stage with a relative staging_target_path", func() error {
			_, err := n.NodeStageVolume(bgCtx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "rel/path", VolumeCapability: mount})
			return err
		}, "not an absolute path"},
		{"stage without volume_capability", func() error {
			_, err := n.NodeStageVolume(bgCtx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: abs})
			return err
		}, "volume_capability is required"},
		{"stage with a bad readonly entry", func() error {
			_, err := n.NodeStageVolume(bgCtx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: abs, VolumeCapability: mount,
				PublishContext: map[string]string{"readonly": "maybe"}})
			return err
		}, `publish_context["readonly"]`},
		{"stage with a refused mount flag", func() error {
			c := mountCap(snw)
			c.GetMount().MountFlags = []string{"noatime,bind"}
			_, err := n.NodeStageVolume(bgCtx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: abs, VolumeCapability: c})
			return err
		}, `"bind" is not allowed`},
		{"unstage without volume_id", func() error {
			_, err := n.NodeUnstageVolume(bgCtx, &csi.NodeUnstageVolumeRequest{StagingTargetPath: abs})
			return err
		}, "volume_id is required"},
		{"unstage without staging_target_path", func() error {
			_, err := n.NodeUnstageVolume(bgCtx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1"})
			return err
		}, "staging_target_path is required"},
		{"publish without volume_id", func() error {
			_, err := n.NodePublishVolume(bgCtx, &csi.NodePublishVolumeRequest{TargetPath: abs, StagingTargetPath: abs, VolumeCapability: mount})
			return err
		}, "volume_id is required"},
		{"publish without target_path", func() error {
			_, err := n.NodePublishVolume(bgCtx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: abs, VolumeCapability: mount})
			return err
		}, "target_path is required"},
		{"publish without volume_capability", func() error {
			_, err := n.NodePublishVolume(bgCtx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: abs})
			return err
		}, "volume_capability is required"},
		{"unpublish without volume_id", func() error {
			_, err := n.NodeUnpublishVolume(bgCtx, &csi.NodeUnpublishVolumeRequest{TargetPath: abs})
			return err
		}, "volume_id is required"},
		{"unpublish without target_path", func() error {
			_, err := n.NodeUnpublishVolume(bgCtx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1"})
			return err
		}, "target_path is required"},
		{"stats without volume_id", func() error {
			_, err := n.NodeGetVolumeStats(bgCtx, &csi.NodeGetVolumeStatsRequest{VolumePath: abs})
			return err
		}, "volume_id is required"},
		{"stats without volume_path", func() error {
			_, err := n.NodeGetVolumeStats(bgCtx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1"})
			return err
		}, "volume_path is required"},
		{"expand without volume_id", func() error {
			_, err := n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumePath: abs})
			return err
		}, "volume_id is required"},
		{"expand without volume_path", func() error {
			_, err := n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-1"})
			return err
		}, "volume_path is required"},
		{"expand with an unsupported capability", func() error {
			_, err := n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: abs, VolumeCapability: mountCap(mnmw)})
			return err
		}, "volume_capability"},
		{"expand with required above limit", func() error {
			_, err := n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: abs,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20, LimitBytes: 1 << 20}})
			return err
		}, "exceeds limit_bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), codes.InvalidArgument, tc.want) })
	}
}

// TestNodeUnknownVolume: the calls that need the volume say NOT_FOUND before they would
// mount; the calls that undo say OK, there being nothing left to undo.
func TestNodeUnknownVolume(t *testing.T) {
	h := newNodeHarness(t)
	h.n.canMount = func() error { return nil } // nothing gets as far as mounting
	dir := h.mkdir("somewhere")
	const id = "vol-0000000000000000"
	wantCode(t, h.stage(id, dir, mountCap(snw), nil), codes.NotFound, id)
	wantCode(t, h.publish(id, dir, dir+"/target", mountCap(snw), false), codes.NotFound, id)
	_, err := h.n.NodeGetVolumeStats(bgCtx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: dir})
	wantCode(t, err, codes.NotFound, id)
	_, err = h.n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: dir})
	wantCode(t, err, codes.NotFound, id)

	needsRoot(t)
	h.n.canMount = euidCanMount
	wantCode(t, h.unstage(id, dir), codes.OK)
	wantCode(t, h.unpublish(id, dir+"/target"), codes.OK)
	wantCode(t, h.unpublish("../../etc", dir+"/target"), codes.OK) // an ID that is no file name
}

// TestNodeNeedsRoot: a process that cannot mount says so and why, and changes nothing.
func TestNodeNeedsRoot(t *testing.T) {
	h := newNodeHarness(t)
	h.n.canMount = func() error { return errNeedsRoot }
	id := h.createVolume("pvc-1", mountCap(snw), testVolumeBytes)
	staging, target := h.mkdir("staging"), h.dir+"/target"
	calls := map[string]func() error{
		"stage":     func() error { return h.stage(id, staging, mountCap(snw), nil) },
		"unstage":   func() error { return h.unstage(id, staging) },
		"publish":   func() error { return h.publish(id, staging, target, mountCap(snw), false) },
		"unpublish": func() error { return h.unpublish(id, target) },
		"expand": func() error {
			_, err := h.n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			wantCode(t, call(), codes.FailedPrecondition, "needs root (CAP_SYS_ADMIN) to mount", "route Node calls to a node driver")
		})
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target_path was created although nothing could be mounted: %v", err)
	}
}

// TestNodeMissingTool: a missing program is FAILED_PRECONDITION naming the package to
// install, found before anything changes.
func TestNodeMissingTool(t *testing.T) {
	tests := []struct {
		missing string
		c       *csi.VolumeCapability
		pkg     string
	}{
		{"mkfs.ext4", mountCap(snw), "e2fsprogs"},
		{"resize2fs", mountCap(snw), "e2fsprogs"},
		{"blkid", mountCap(snw), "util-linux"},
		{"losetup", blockCap(snw), "util-linux"},
	}
	for _, tc := range tests {
		t.Run(tc.missing, func(t *testing.T) {
			h := newNodeHarness(t)
			h.n.canMount = func() error { return nil }
			h.n.lookPath = func(name string) (string, error) {
				if name == tc.missing {
					return "", fmt.Errorf("%s: not found", name)
				}
				return lookPathOrSbin(name)
			}
			id := h.createVolume("pvc-1", tc.c, testVolumeBytes)
			wantCode(t, h.stage(id, h.mkdir("staging"), tc.c, nil), codes.FailedPrecondition, tc.missing, "install "+tc.pkg)
		})
	}
}

func TestNodeStatus(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		code      codes.Code
		fragments []string
	}{
		{"nil", nil, codes.OK, nil},
		{"a status keeps its code", status.Error(codes.AlreadyExists, "taken"), codes.AlreadyExists, []string{"taken"}},
		{"missing tool", fmt.Errorf("stage: %w", &missingToolError{tool: "resize2fs"}), codes.FailedPrecondition, []string{"resize2fs", "e2fsprogs"}},
		{"needs root", fmt.Errorf("losetup: %w", errNeedsRoot), codes.FailedPrecondition, []string{"needs root"}},
		{"EPERM", fmt.Errorf("mount: %w", os.ErrPermission), codes.FailedPrecondition, []string{"needs root"}},
		{"anything else", errors.New("disk on fire"), codes.Internal, []string{"node: disk on fire"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, nodeStatus(tc.err), tc.code, tc.fragments...) })
	}
}

// TestNodeFailedCallsReleaseTheLock: a call that fails after taking the volume's lock (an
// unknown volume, a process that cannot mount) leaves the volume free for the next call. Each
// case has a volume of its own, so a lock left held fails that case only, within a second.
func TestNodeFailedCallsReleaseTheLock(t *testing.T) {
	h := newNodeHarness(t)
	h.n.canMount = func() error { return errNeedsRoot }
	dir := h.mkdir("somewhere")
	tests := []struct {
		name  string
		known bool // a volume the appliance has, rather than an unknown ID
		call  func(id string) error
		code  codes.Code
	}{
		{"stage unknown", false, func(id string) error { return h.stage(id, dir, mountCap(snw), nil) }, codes.NotFound},
		{"publish unknown", false, func(id string) error { return h.publish(id, dir, dir+"/target", mountCap(snw), false) }, codes.NotFound},
		{"stage", true, func(id string) error { return h.stage(id, dir, mountCap(snw), nil) }, codes.FailedPrecondition},
		{"unstage", true, func(id string) error { return h.unstage(id, dir) }, codes.FailedPrecondition},
		{"unpublish", true, func(id string) error { return h.unpublish(id, dir+"/target") }, codes.FailedPrecondition},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("vol-%016x", i)
			if tc.known {
				id = h.createVolume(fmt.Sprintf("pvc-%d", i), mountCap(snw), testVolumeBytes)
			}
			wantCode(t, tc.call(id), tc.code)
			ctx, cancel := context.WithTimeout(bgCtx, time.Second)
			defer cancel()
			unlock, err := h.n.lockVolume(ctx, id)
			if err != nil {
				t.Fatalf("volume %s is still locked after the call failed: %v", id, err)
			}
			unlock()
		})
	}
}
