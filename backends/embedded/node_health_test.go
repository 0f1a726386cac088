package embedded

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

func (h *nodeHarness) volumeHealth(id, staging, target string) (*csi.VolumeHealth, error) {
	resp, err := h.n.NodeGetVolumeHealth(context.Background(), &csi.NodeGetVolumeHealthRequest{
		VolumeId: id, StagingTargetPath: staging, VolumePublishPath: target,
	})
	return resp.GetVolumeHealth(), err
}

// TestNodeGetVolumeHealthWithoutMounts covers what needs neither root nor losetup: the
// arguments, an unknown volume, and a volume the node has never staged.
func TestNodeGetVolumeHealthWithoutMounts(t *testing.T) {
	h := newNodeHarness(t)
	idle := h.createVolume("pvc-idle", mountCap(snw), testVolumeBytes)
	gone := h.createVolume("pvc-gone", mountCap(snw), testVolumeBytes)
	removeImage(t, h.a, gone)
	tests := []struct {
		name             string
		id, staging, pub string
		code             codes.Code
		fragments        []string
		want             []healthEntry
	}{
		{"no volume_id", "", "", "", codes.InvalidArgument, []string{"volume_id is required"}, nil},
		{"relative staging_target_path", idle, "staging", "", codes.InvalidArgument, []string{"staging_target_path", "not an absolute path"}, nil},
		{"relative volume_publish_path", idle, "", "pods/t", codes.InvalidArgument, []string{"volume_publish_path", "not an absolute path"}, nil},
		{"NUL in a path", idle, "/staging\x00x", "", codes.InvalidArgument, []string{"NUL"}, nil},
		{"unknown volume", "vol-nope", "", "", codes.NotFound, []string{"vol-nope", "does not exist"}, nil},
		{"unknown volume with paths", "vol-nope", "/staging", "/pods/t", codes.NotFound, []string{"vol-nope"}, nil},
		{"never staged, no paths", idle, "", "", codes.OK, nil, nil},
		{"image gone", gone, "", "", codes.OK, nil, imageMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.volumeHealth(tt.id, tt.staging, tt.pub)
			wantCode(t, err, tt.code, tt.fragments...)
			if err != nil {
				return
			}
			if got.GetVolumeId() != tt.id || !slices.Equal(entriesOf(got), tt.want) {
				t.Errorf("health of %s: %v %v, want %v", tt.id, got.GetVolumeId(), entriesOf(got), tt.want)
			}
		})
	}
}

func TestNodeGetVolumeHealth(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	mountID := h.createVolume("pvc-mount", mountCap(snw), testVolumeBytes)
	blockID := h.createVolume("pvc-block", blockCap(snw), testVolumeBytes)
	roID := h.createVolume("pvc-ro", mountCap(snw), testVolumeBytes)
	idle := h.createVolume("pvc-idle", mountCap(snw), testVolumeBytes)
	pods, nowhere := h.mkdir("pods"), h.mkdir("nowhere")
	mountTarget, blockTarget, roTarget := filepath.Join(pods, "m"), filepath.Join(pods, "b"), filepath.Join(pods, "ro")
	mountStaging := h.stageAndPublish(mountID, mountCap(snw), mountTarget, false)
	blockStaging := h.stageAndPublish(blockID, blockCap(snw), blockTarget, false)
	roStaging := h.stageAndPublish(roID, mountCap(snw), roTarget, true)

	notStaged := []healthEntry{{csi.VolumeHealthErrorType_INACCESSIBLE, reasonNotStaged}}
	notPublished := []healthEntry{{csi.VolumeHealthErrorType_INACCESSIBLE, reasonNotPublished}}
	tests := []struct {
		name             string
		id, staging, pub string
		want             []healthEntry
	}{
		{"file system at both paths", mountID, mountStaging, mountTarget, nil},
		{"file system at the target only", mountID, "", mountTarget, nil},
		{"file system where recorded", mountID, "", "", nil},
		{"block device at both paths", blockID, blockStaging, blockTarget, nil},
		{"block device where recorded", blockID, "", "", nil},
		{"published read-only on purpose", roID, roStaging, roTarget, nil},
		{"not published at the path", mountID, "", nowhere, notPublished},
		{"staged elsewhere", mountID, blockStaging, "", notStaged},
		{"another volume's target", blockID, "", mountTarget, notPublished},
		{"paths that do not exist", idle, filepath.Join(nowhere, "s"), filepath.Join(nowhere, "t"), append(slices.Clone(notStaged), notPublished...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.volumeHealth(tt.id, tt.staging, tt.pub)
			h.must(err, "volume health")
			if got.GetVolumeId() != tt.id || !slices.Equal(entriesOf(got), tt.want) {
				t.Errorf("health of %s: %v %v, want %v (%v)", tt.id, got.GetVolumeId(), entriesOf(got), tt.want, got.GetHealthStatuses())
			}
		})
	}

	t.Run("file system turned read-only", func(t *testing.T) {
		// What ext4 does to itself after an I/O error (errors=remount-ro).
		h.must(unix.Mount("", mountStaging, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""), "remount read-only")
		defer func() { h.must(unix.Mount("", mountStaging, "", unix.MS_REMOUNT, ""), "remount read-write") }()
		got, err := h.volumeHealth(mountID, "", "")
		h.must(err, "volume health")
		want := []healthEntry{{csi.VolumeHealthErrorType_DEGRADED, reasonBecameReadOnly}}
		if !slices.Equal(entriesOf(got), want) {
			t.Fatalf("health %v, want %v: one entry for both paths", entriesOf(got), want)
		}
		for _, p := range []string{mountStaging, mountTarget} {
			if msg := got.GetHealthStatuses()[0].GetMessage(); !strings.Contains(msg, p) {
				t.Errorf("message %q does not name %s", msg, p)
			}
		}
	})

	t.Run("unmounted behind the node's back", func(t *testing.T) {
		h.must(unix.Unmount(blockTarget, 0), "unmount the block target")
		got, err := h.volumeHealth(blockID, "", "")
		h.must(err, "volume health")
		if !slices.Equal(entriesOf(got), notPublished) || !strings.Contains(got.GetHealthStatuses()[0].GetMessage(), blockTarget) {
			t.Fatalf("health %v, want %v naming %s", got.GetHealthStatuses(), notPublished, blockTarget)
		}
		h.must(h.unpublish(blockID, blockTarget), "unpublish")
		got, err = h.volumeHealth(blockID, "", "")
		h.must(err, "volume health")
		if len(got.GetHealthStatuses()) != 0 {
			t.Errorf("health after NodeUnpublishVolume %v; want none: the node no longer expects it there", got.GetHealthStatuses())
		}
	})

	for id, paths := range map[string][2]string{mountID: {mountStaging, mountTarget}, roID: {roStaging, roTarget}, blockID: {blockStaging, ""}} {
		if paths[1] != "" {
			h.must(h.unpublish(id, paths[1]), "unpublish")
		}
		h.must(h.unstage(id, paths[0]), "unstage")
	}
	h.assertReleased()
}

// storageEntry is a StorageBackendHealth without its message, for comparisons.
type storageEntry struct {
	status csi.StorageHealthErrorType
	reason string
}

func storageEntries(resp *csi.NodeGetStorageHealthResponse) []storageEntry {
	var out []storageEntry
	for _, e := range resp.GetBackendHealth() {
		out = append(out, storageEntry{e.GetStatus(), e.GetReason()})
	}
	return out
}

func TestNodeGetStorageHealth(t *testing.T) {
	storage := func(a *Appliance, secrets map[string]string) (*csi.NodeGetStorageHealthResponse, error) {
		return a.node.NodeGetStorageHealth(context.Background(), &csi.NodeGetStorageHealthRequest{Secrets: secrets})
	}
	degraded := func(reason string) []storageEntry {
		return []storageEntry{{csi.StorageHealthErrorType_STORAGE_DEGRADED, reason}}
	}

	t.Run("healthy", func(t *testing.T) {
		a := openTest(t, Config{})
		grpVolume(t, a, "v")
		resp, err := storage(a, nil)
		if err != nil || len(resp.GetBackendHealth()) != 0 {
			t.Fatalf("%v %v; want no entries", resp.GetBackendHealth(), err)
		}
	})

	t.Run("secrets over 4 KiB", func(t *testing.T) {
		_, err := storage(openTest(t, Config{}), map[string]string{"k": strings.Repeat("s", 5000)})
		wantCode(t, err, codes.InvalidArgument, "secrets")
	})

	t.Run("less space than the images may take", func(t *testing.T) {
		dir := t.TempDir()
		u, err := fsUsageAt(dir)
		if err != nil {
			t.Fatal(err)
		}
		if u.availBytes > 8<<40 {
			t.Skipf("the test file system has %d bytes free; ext4 cannot hold a sparse image larger than that", u.availBytes)
		}
		size := roundUp(u.availBytes+1<<30, allocationUnit)
		a := openTest(t, Config{DataDir: dir, CapacityBytes: size, MaxVolumeBytes: size})
		if _, err := (&controllerServer{a: a}).CreateVolume(context.Background(), &csi.CreateVolumeRequest{
			Name: "huge", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		}); err != nil {
			t.Fatal(err)
		}
		resp, err := storage(a, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := storageEntries(resp); !slices.Equal(got, degraded(reasonDataDirLowSpace)) {
			t.Fatalf("%v; want %v", resp.GetBackendHealth(), degraded(reasonDataDirLowSpace))
		}
		if msg := resp.GetBackendHealth()[0].GetMessage(); !strings.Contains(msg, "ENOSPC") || !strings.Contains(msg, dir) {
			t.Errorf("message %q does not say what fails where", msg)
		}
	})

	t.Run("data directory gone", func(t *testing.T) {
		a := openTest(t, Config{})
		if err := os.RemoveAll(a.cfg.DataDir); err != nil {
			t.Fatal(err)
		}
		resp, err := storage(a, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []storageEntry{{csi.StorageHealthErrorType_STORAGE_UNREACHABLE, reasonDataDirUnreachable}}
		if got := storageEntries(resp); !slices.Equal(got, want) || !strings.Contains(resp.GetBackendHealth()[0].GetMessage(), a.cfg.DataDir) {
			t.Fatalf("%v; want %v naming %s", resp.GetBackendHealth(), want, a.cfg.DataDir)
		}
	})

	t.Run("read-only file system", func(t *testing.T) {
		needsRoot(t)
		h := newNodeHarness(t)
		dir := h.a.cfg.DataDir
		h.must(bindMount(dir, dir, mountOptions{}.withReadonly(true)), "bind-mount the data directory read-only")
		defer unmount(dir)
		resp, err := storage(h.a, nil)
		h.must(err, "storage health")
		if got := storageEntries(resp); !slices.Equal(got, degraded(reasonDataDirReadOnly)) {
			t.Fatalf("%v; want %v", resp.GetBackendHealth(), degraded(reasonDataDirReadOnly))
		}
	})
}
