package embedded

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// TestNodeExpandVolume: after ControllerExpandVolume, NodeExpandVolume makes the published
// file system (and a block device) as large as the volume, and is idempotent.
func TestNodeExpandVolume(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	mountID := h.createVolume("pvc-mount", mountCap(snw), testVolumeBytes)
	blockID := h.createVolume("pvc-block", blockCap(snw), testVolumeBytes)
	pods := h.mkdir("pods")
	mountTarget, blockTarget := filepath.Join(pods, "m"), filepath.Join(pods, "b")
	mountStaging := h.stageAndPublish(mountID, mountCap(snw), mountTarget, false)
	blockStaging := h.stageAndPublish(blockID, blockCap(snw), blockTarget, false)
	before, err := fsUsageAt(mountTarget)
	h.must(err, "statfs")

	const bigger = 2 * testVolumeBytes
	for _, id := range []string{mountID, blockID} {
		_, err := h.ctrl.ControllerExpandVolume(bgCtx, &csi.ControllerExpandVolumeRequest{
			VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: bigger},
		})
		h.must(err, "controller expand")
	}
	expand := func(id, path string, r *csi.CapacityRange, c *csi.VolumeCapability) (*csi.NodeExpandVolumeResponse, error) {
		return h.n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: path, CapacityRange: r, VolumeCapability: c})
	}

	// Growing a mounted ext4 file system takes CAP_SYS_RESOURCE; without it the node says so,
	// and the file system grows offline when the volume is staged again.
	online := hasCapability(t, unix.CAP_SYS_RESOURCE)
	mountCode, mountWant := codes.OK, ""
	if !online {
		t.Log("this process lacks CAP_SYS_RESOURCE: expecting online growth to be refused and offline growth on restage")
		mountCode, mountWant = codes.FailedPrecondition, "CAP_SYS_RESOURCE"
	}
	tests := []struct {
		name string
		id   string
		path string
		r    *csi.CapacityRange
		c    *csi.VolumeCapability
		code codes.Code
		want string
	}{
		{"more than the controller gave", mountID, mountTarget, &csi.CapacityRange{RequiredBytes: 3 * testVolumeBytes}, nil, codes.OutOfRange, "call ControllerExpandVolume first"},
		{"a limit below the size", mountID, mountTarget, &csi.CapacityRange{LimitBytes: testVolumeBytes}, nil, codes.OutOfRange, "cannot shrink"},
		{"not where the volume is", mountID, pods, nil, nil, codes.NotFound, "is not staged or published"},
		{"the wrong access type", mountID, mountTarget, nil, blockCap(snw), codes.InvalidArgument, "asks for a block device"},
		{"file system at the target", mountID, mountTarget, &csi.CapacityRange{RequiredBytes: bigger}, mountCap(snw), mountCode, mountWant},
		{"block device at the target", blockID, blockTarget, &csi.CapacityRange{RequiredBytes: bigger}, blockCap(snw), codes.OK, ""},
		{"block device at the staging path", blockID, blockStaging, nil, nil, codes.OK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := expand(tc.id, tc.path, tc.r, tc.c)
			wantCode(t, err, tc.code, tc.want)
			if tc.code == codes.OK && resp.GetCapacityBytes() != bigger {
				t.Errorf("capacity_bytes %d, want %d", resp.GetCapacityBytes(), bigger)
			}
		})
	}
	if !online {
		h.must(h.unpublish(mountID, mountTarget), "unpublish")
		h.must(h.unstage(mountID, mountStaging), "unstage")
		h.must(h.stage(mountID, mountStaging, mountCap(snw), nil), "stage again")
		h.must(h.publish(mountID, mountStaging, mountTarget, mountCap(snw), false), "publish again")
	}
	// Idempotent: the file system is as large as the volume now.
	for _, path := range []string{mountTarget, mountStaging} {
		resp, err := expand(mountID, path, &csi.CapacityRange{RequiredBytes: bigger}, nil)
		h.must(err, "expand again at "+path)
		if resp.GetCapacityBytes() != bigger {
			t.Errorf("capacity_bytes %d, want %d", resp.GetCapacityBytes(), bigger)
		}
	}

	after, err := fsUsageAt(mountTarget)
	h.must(err, "statfs")
	if after.totalBytes < before.totalBytes*19/10 {
		t.Errorf("the file system holds %d bytes after expansion, %d before; want about twice as much", after.totalBytes, before.totalBytes)
	}
	resp, err := h.n.NodeGetVolumeStats(bgCtx, &csi.NodeGetVolumeStatsRequest{VolumeId: blockID, VolumePath: blockTarget})
	h.must(err, "stats")
	if got := bytesOf(t, resp, csi.VolumeUsage_BYTES).GetTotal(); got != bigger {
		t.Errorf("the block device holds %d bytes, want %d", got, bigger)
	}
	for _, v := range []struct{ id, staging, target string }{{mountID, mountStaging, mountTarget}, {blockID, blockStaging, blockTarget}} {
		h.must(h.unpublish(v.id, v.target), "unpublish")
		h.must(h.unstage(v.id, v.staging), "unstage")
	}
	h.assertReleased()
}

// hasCapability reports whether this process has the capability c in its effective set.
func hasCapability(t *testing.T, c int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return eff&(1<<c) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

// TestNodeExpandReadOnly: a file system mounted read-only cannot grow online; one already as
// large as its volume needs not.
func TestNodeExpandReadOnly(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	id := h.createVolume("pvc-1", mountCap(snw), testVolumeBytes)
	staging := h.mkdir("staging")
	h.must(h.stage(id, staging, mountCap(snw), nil), "stage to make the file system")
	h.must(h.unstage(id, staging), "unstage")
	h.must(h.stage(id, staging, mountCap(snw), map[string]string{"readonly": "true"}), "stage read-only")
	_, err := h.n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: staging})
	wantCode(t, err, codes.OK)

	_, err = h.ctrl.ControllerExpandVolume(bgCtx, &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * testVolumeBytes},
	})
	h.must(err, "controller expand")
	_, err = h.n.NodeExpandVolume(bgCtx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: staging})
	wantCode(t, err, codes.FailedPrecondition, "mounted read-only")
	h.must(h.unstage(id, staging), "unstage")
	h.assertReleased()
}
