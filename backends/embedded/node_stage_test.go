package embedded

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestNodeMountVolumeLifecycle: data written through a published file system is there again
// after the volume was unpublished, unstaged, and staged and published anew.
func TestNodeMountVolumeLifecycle(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	c := mountCap(snw)
	id := h.createVolume("pvc-data", c, testVolumeBytes)
	parent := h.mkdir("pods", "a")
	target := filepath.Join(parent, "mnt")

	staging := h.stageAndPublish(id, c, target, false)
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Fatalf("target_path is not a directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(target, "hello.txt"), []byte("kept"), 0o600); err != nil {
		t.Fatalf("write through the target path: %v", err)
	}
	h.must(h.unpublish(id, target), "unpublish")
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("target_path still exists after unpublish: %v", err)
	}
	h.must(h.unstage(id, staging), "unstage")
	h.assertReleased()

	h.stageAndPublish(id, c, target, false)
	got, err := os.ReadFile(filepath.Join(target, "hello.txt"))
	if err != nil || string(got) != "kept" {
		t.Fatalf("after restaging the file holds %q (%v), want \"kept\"", got, err)
	}
	h.must(h.unpublish(id, target), "unpublish")
	h.must(h.unstage(id, staging), "unstage")
	h.assertReleased()
}

// TestNodeStageIdempotency follows the spec: staged identically → OK; staged at that path
// with another capability → ALREADY_EXISTS. It also holds after the in-memory records are
// lost (a restarted process), judged on what the kernel shows.
func TestNodeStageIdempotency(t *testing.T) {
	needsRoot(t)
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "same process", true: "after restart"}[restart], func(t *testing.T) {
			h := newNodeHarness(t)
			mountID := h.createVolume("pvc-mount", mountCap(snw), testVolumeBytes)
			blockID := h.createVolume("pvc-block", blockCap(snw), testVolumeBytes)
			mountStaging, blockStaging := h.mkdir("staging", "m"), h.mkdir("staging", "b")
			h.must(h.stage(mountID, mountStaging, mountCap(snw), nil), "stage mount")
			h.must(h.stage(blockID, blockStaging, blockCap(snw), nil), "stage block")
			tests := []struct {
				name    string
				id      string
				staging string
				c       *csi.VolumeCapability
				pc      map[string]string
				code    codes.Code
				onlyMem bool // only this process's records can tell
			}{
				{"mount again", mountID, mountStaging, mountCap(snw), nil, codes.OK, false},
				{"mount as block", mountID, mountStaging, blockCap(snw), nil, codes.AlreadyExists, false},
				{"mount read-only", mountID, mountStaging, mountCap(snw), map[string]string{"readonly": "true"}, codes.AlreadyExists, false},
				{"mount with another access mode", mountID, mountStaging, mountCap(snmw), nil, codes.AlreadyExists, true},
				{"block again", blockID, blockStaging, blockCap(snw), nil, codes.OK, false},
				{"block as mount", blockID, blockStaging, mountCap(snw), nil, codes.AlreadyExists, false},
				{"block read-only", blockID, blockStaging, blockCap(snw), map[string]string{"readonly": "true"}, codes.AlreadyExists, false},
				{"another volume's staging path", blockID, mountStaging, blockCap(snw), nil, codes.AlreadyExists, false},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					if restart {
						h.n.records = newNodeRecords() // a repeat adopts what it finds
					}
					want := tc.code
					if restart && tc.onlyMem {
						want = codes.OK // after a restart only the kernel's view is left
					}
					wantCode(t, h.stage(tc.id, tc.staging, tc.c, tc.pc), want)
				})
			}
			h.must(h.unstage(mountID, mountStaging), "unstage mount")
			h.must(h.unstage(blockID, blockStaging), "unstage block")
			h.must(h.unstage(blockID, blockStaging), "unstage block twice")
			h.assertReleased()
		})
	}
}

func TestNodeStageRefusals(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	id := h.createVolume("pvc-1", mountCap(snw), testVolumeBytes)
	file := filepath.Join(h.dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ro := map[string]string{"readonly": "true"}
	badFlags := mountCap(snw)
	badFlags.GetMount().MountFlags = []string{"no_such_ext4_option"}
	tests := []struct {
		name    string
		staging string
		c       *csi.VolumeCapability
		pc      map[string]string
		code    codes.Code
		want    string
	}{
		{"missing staging directory", filepath.Join(h.dir, "nope"), mountCap(snw), nil, codes.FailedPrecondition, "does not exist"},
		{"staging path is a file", file, mountCap(snw), nil, codes.FailedPrecondition, "not a directory"},
		{"unsupported access mode", h.mkdir("s1"), mountCap(mnmw), nil, codes.FailedPrecondition, "not supported"},
		{"unsupported fs_type", h.mkdir("s2"), &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "xfs"}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw},
		}, nil, codes.FailedPrecondition, "xfs"},
		{"blank volume staged read-only", h.mkdir("s3"), mountCap(snw), ro, codes.FailedPrecondition, "no file system yet"},
		{"mount flags ext4 refuses", h.mkdir("s4"), badFlags, nil, codes.InvalidArgument, "no_such_ext4_option"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, h.stage(id, tc.staging, tc.c, tc.pc), tc.code, tc.want)
			h.assertReleased()
		})
	}
}

// TestNodeStageReadOnly: the publish_context's readonly stages read-only, and a file system
// made earlier is mounted so.
func TestNodeStageReadOnly(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	id := h.createVolume("pvc-1", mountCap(snw), testVolumeBytes)
	staging := h.mkdir("staging")
	h.must(h.stage(id, staging, mountCap(snw), map[string]string{"readonly": "false"}), "stage read-write")
	h.must(h.unstage(id, staging), "unstage")

	h.must(h.stage(id, staging, mountCap(snw), map[string]string{"readonly": "true"}), "stage read-only")
	if err := os.WriteFile(filepath.Join(staging, "x"), nil, 0o600); err == nil {
		t.Fatal("wrote to a volume staged read-only")
	}
	h.must(h.unstage(id, staging), "unstage")
	h.assertReleased()
}

// TestNodeStageGrowsFileSystem: a clone made larger than its source shows its full size once
// staged.
func TestNodeStageGrowsFileSystem(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	src := h.createVolume("pvc-src", mountCap(snw), testVolumeBytes)
	staging := h.mkdir("staging")
	h.must(h.stage(src, staging, mountCap(snw), nil), "stage source")
	small, err := fsUsageAt(staging)
	h.must(err, "statfs")
	h.must(os.WriteFile(filepath.Join(staging, "seed"), []byte("from the source"), 0o600), "write")
	h.must(h.unstage(src, staging), "unstage source")

	clone := h.createVolumeFrom("pvc-clone", mountCap(snw), 2*testVolumeBytes, &csi.VolumeContentSource{
		Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}},
	})
	h.must(h.stage(clone, staging, mountCap(snw), nil), "stage clone")
	big, err := fsUsageAt(staging)
	h.must(err, "statfs")
	if big.totalBytes < small.totalBytes*19/10 {
		t.Errorf("the clone's file system holds %d bytes, its 64 MiB source's %d; want about twice as much", big.totalBytes, small.totalBytes)
	}
	readAt(t, filepath.Join(staging, "seed"), 0, []byte("from the source"))
	h.must(h.unstage(clone, staging), "unstage clone")
	h.assertReleased()
}

// TestNodeUnstageKeepsDeviceInUse: unstaging while a publication remains (which a CO must
// not do) unmounts the staging path but leaves the device the publication needs.
func TestNodeUnstageKeepsDeviceInUse(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	id := h.createVolume("pvc-1", blockCap(snw), testVolumeBytes)
	target := filepath.Join(h.mkdir("pods"), "dev")
	staging := h.stageAndPublish(id, blockCap(snw), target, false)
	h.must(h.unstage(id, staging), "unstage")
	if len(loopsUnder(h.dir)) != 1 {
		t.Fatalf("loop devices %v; want the published one kept", loopsUnder(h.dir))
	}
	h.must(h.unpublish(id, target), "unpublish")
	h.assertReleased()
}

// TestNodeConcurrentCalls runs the whole cycle for several volumes at once, and races two
// stages of one volume, which the per-volume lock serializes into one stage and one OK.
func TestNodeConcurrentCalls(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	var ids []string
	for i, c := range []*csi.VolumeCapability{mountCap(snw), blockCap(snw), mountCap(snmw), blockCap(snmw)} {
		ids = append(ids, h.createVolume("pvc-"+string(rune('a'+i)), c, testVolumeBytes))
	}
	caps := []*csi.VolumeCapability{mountCap(snw), blockCap(snw), mountCap(snmw), blockCap(snmw)}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i, id := range ids {
		wg.Go(func() {
			staging := h.mkdir("staging", id)
			target := filepath.Join(h.mkdir("pods", id), "t")
			var inner sync.WaitGroup
			for range 2 {
				inner.Go(func() { errs <- h.stage(id, staging, caps[i], nil) })
			}
			inner.Wait()
			errs <- h.publish(id, staging, target, caps[i], false)
			errs <- h.unpublish(id, target)
			errs <- h.unstage(id, staging)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := h.n.locks.size(); n != 0 {
		t.Errorf("%d volume locks left behind", n)
	}
	h.assertReleased()
}
