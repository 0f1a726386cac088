package embedded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func TestNodeGetVolumeStats(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	mountID := h.createVolume("pvc-mount", mountCap(snw), testVolumeBytes)
	blockID := h.createVolume("pvc-block", blockCap(snw), testVolumeBytes)
	pods := h.mkdir("pods")
	mountTarget, blockTarget := filepath.Join(pods, "m"), filepath.Join(pods, "b")
	mountStaging := h.stageAndPublish(mountID, mountCap(snw), mountTarget, false)
	blockStaging := h.stageAndPublish(blockID, blockCap(snw), blockTarget, false)
	h.must(os.WriteFile(filepath.Join(mountTarget, "data"), make([]byte, 4<<20), 0o600), "write 4 MiB")

	stats := func(id, path string) (*csi.NodeGetVolumeStatsResponse, error) {
		return h.n.NodeGetVolumeStats(bgCtx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: path})
	}
	for _, path := range []string{mountTarget, mountStaging} {
		t.Run("file system at "+filepath.Base(path), func(t *testing.T) {
			resp, err := stats(mountID, path)
			h.must(err, "stats")
			b := bytesOf(t, resp, csi.VolumeUsage_BYTES)
			if b.GetTotal() <= 0 || b.GetTotal() > testVolumeBytes || b.GetUsed() < 4<<20 || b.GetAvailable() <= 0 || b.GetUsed()+b.GetAvailable() > b.GetTotal() {
				t.Errorf("bytes total %d used %d available %d: not a 64 MiB file system holding 4 MiB", b.GetTotal(), b.GetUsed(), b.GetAvailable())
			}
			in := bytesOf(t, resp, csi.VolumeUsage_INODES)
			if in.GetTotal() <= 0 || in.GetUsed() <= 0 || in.GetUsed()+in.GetAvailable() != in.GetTotal() {
				t.Errorf("inodes total %d used %d available %d do not add up", in.GetTotal(), in.GetUsed(), in.GetAvailable())
			}
		})
	}
	for _, path := range []string{blockTarget, blockStaging} {
		t.Run("block device at "+filepath.Base(path), func(t *testing.T) {
			resp, err := stats(blockID, path)
			h.must(err, "stats")
			if len(resp.GetUsage()) != 1 || bytesOf(t, resp, csi.VolumeUsage_BYTES).GetTotal() != testVolumeBytes {
				t.Errorf("usage %v; want one entry of %d bytes", resp.GetUsage(), testVolumeBytes)
			}
		})
	}

	notFound := []struct{ name, id, path string }{
		{"relative path", mountID, "some/path"},
		{"missing path", mountID, filepath.Join(pods, "nope")},
		{"path of another volume", mountID, blockTarget},
		{"plain directory", blockID, pods},
	}
	for _, tc := range notFound {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stats(tc.id, tc.path)
			wantCode(t, err, codes.NotFound, "is not staged or published at")
		})
	}
}
