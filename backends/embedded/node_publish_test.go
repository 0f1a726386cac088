package embedded

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// TestNodeBlockVolumeLifecycle: bytes written through a published block device land in the
// volume's image and read back through a new publication.
func TestNodeBlockVolumeLifecycle(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	c := blockCap(snw)
	id := h.createVolume("pvc-raw", c, testVolumeBytes)
	target := filepath.Join(h.mkdir("pods", "a"), "dev")
	data, off := []byte("raw bytes through the device"), int64(3<<20)

	staging := h.stageAndPublish(id, c, target, false)
	fi, err := os.Stat(target)
	if err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatalf("target_path is not a device: %v %v", fi.Mode(), err)
	}
	f, err := os.OpenFile(target, os.O_WRONLY, 0)
	h.must(err, "open the device")
	_, err = f.WriteAt(data, off)
	h.must(err, "write the device")
	h.must(f.Sync(), "sync the device")
	f.Close()

	h.must(h.unpublish(id, target), "unpublish")
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("target_path still exists after unpublish: %v", err)
	}
	h.must(h.unstage(id, staging), "unstage")
	h.assertReleased()
	readAt(t, h.a.images.volumePath(id), off, data)

	h.stageAndPublish(id, c, target, false)
	readAt(t, target, off, data)
	h.must(h.unpublish(id, target), "unpublish")
	h.must(h.unstage(id, staging), "unstage")
	h.assertReleased()
}

// TestNodeReadOnlyPublish: a publication is read-only when readonly is set or the access
// mode only reads, for file systems and for devices alike; the stage stays writable.
func TestNodeReadOnlyPublish(t *testing.T) {
	needsRoot(t)
	tests := []struct {
		name     string
		c        *csi.VolumeCapability
		readonly bool
	}{
		{"mount with readonly", mountCap(snw), true},
		{"mount reader-only mode", mountCap(snro), false},
		{"mount multi-node reader", mountCap(mnro), false},
		{"block with readonly", blockCap(snw), true},
		{"block reader-only mode", blockCap(snro), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newNodeHarness(t)
			id := h.createVolume("pvc-ro", tc.c, testVolumeBytes)
			target := filepath.Join(h.mkdir("pods"), "t")
			staging := h.stageAndPublish(id, tc.c, target, tc.readonly)
			if isBlock(tc.c) {
				if f, err := os.OpenFile(target, os.O_WRONLY, 0); err == nil {
					_, werr := f.WriteAt([]byte("x"), 0)
					f.Close()
					if werr == nil {
						t.Fatal("wrote to a device published read-only")
					}
				}
				readAt(t, target, 0, make([]byte, 16)) // still readable
			} else {
				if err := os.WriteFile(filepath.Join(target, "x"), nil, 0o600); err == nil {
					t.Fatal("wrote to a file system published read-only")
				}
				h.must(os.WriteFile(filepath.Join(staging, "x"), nil, 0o600), "write to the read-write stage")
			}
			h.must(h.publish(id, staging, target, tc.c, tc.readonly), "publish again")
			h.must(h.unpublish(id, target), "unpublish")
			h.must(h.unstage(id, staging), "unstage")
			h.assertReleased()
		})
	}
}

// TestNodePublishIdempotency follows the spec's tables for a second NodePublishVolume of a
// volume on one node.
func TestNodePublishIdempotency(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	pods := h.mkdir("pods")
	target := func(name string) string { return filepath.Join(pods, name) }
	withFlags := mountCap(snmw)
	withFlags.GetMount().MountFlags = []string{"noatime"}

	type step struct {
		name     string
		target   string
		c        *csi.VolumeCapability
		readonly bool
		code     codes.Code
	}
	volumes := []struct {
		name  string
		c     *csi.VolumeCapability
		steps []step
	}{
		{"single node writer", mountCap(snw), []step{
			{"publish", target("w1"), mountCap(snw), false, codes.OK},
			{"same again", target("w1"), mountCap(snw), false, codes.OK},
			{"same target read-only", target("w1"), mountCap(snw), true, codes.AlreadyExists},
			{"same target as block", target("w1"), blockCap(snw), false, codes.AlreadyExists},
			{"same target other mode", target("w1"), mountCap(snmw), false, codes.AlreadyExists},
			{"another target", target("w2"), mountCap(snw), false, codes.FailedPrecondition},
		}},
		{"single node single writer", mountCap(snsw), []step{
			{"publish", target("s1"), mountCap(snsw), false, codes.OK},
			{"another target", target("s2"), mountCap(snsw), false, codes.FailedPrecondition},
			{"another target asking for many", target("s3"), mountCap(snmw), false, codes.FailedPrecondition},
		}},
		{"single node multi writer", mountCap(snmw), []step{
			{"publish", target("m1"), mountCap(snmw), false, codes.OK},
			{"another target", target("m2"), mountCap(snmw), false, codes.OK},
			{"another target read-only", target("m3"), mountCap(snmw), true, codes.OK},
			{"another target other capability", target("m4"), withFlags, false, codes.FailedPrecondition},
		}},
		{"block", blockCap(snw), []step{
			{"publish", target("b1"), blockCap(snw), false, codes.OK},
			{"same again", target("b1"), blockCap(snw), false, codes.OK},
			{"same target read-only", target("b1"), blockCap(snw), true, codes.AlreadyExists},
			{"target of another volume", target("w1"), blockCap(snw), false, codes.AlreadyExists},
		}},
	}
	for _, v := range volumes {
		t.Run(v.name, func(t *testing.T) {
			id := h.createVolume("pvc-"+strings.ReplaceAll(v.name, " ", "-"), v.c, testVolumeBytes)
			staging := h.mkdir("staging", id)
			h.must(h.stage(id, staging, v.c, nil), "stage")
			for _, s := range v.steps {
				t.Run(s.name, func(t *testing.T) { wantCode(t, h.publish(id, staging, s.target, s.c, s.readonly), s.code) })
			}
		})
	}

	// A restarted process has lost its records and judges on what the kernel shows.
	h.n.records = newNodeRecords()
	id := h.createVolume("pvc-restart", mountCap(snw), testVolumeBytes)
	staging := h.mkdir("staging", id)
	h.must(h.stage(id, staging, mountCap(snw), nil), "stage")
	h.must(h.publish(id, staging, target("r1"), mountCap(snw), false), "publish")
	h.n.records = newNodeRecords()
	wantCode(t, h.publish(id, staging, target("r1"), mountCap(snw), true), codes.AlreadyExists)
	wantCode(t, h.publish(id, staging, target("r1"), mountCap(snw), false), codes.OK)
}

func TestNodePublishPreconditions(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	mountID := h.createVolume("pvc-mount", mountCap(snw), testVolumeBytes)
	blockID := h.createVolume("pvc-block", blockCap(snw), testVolumeBytes)
	mountStaging, blockStaging := h.mkdir("staging", "m"), h.mkdir("staging", "b")
	h.must(h.stage(mountID, mountStaging, mountCap(snw), nil), "stage mount")
	h.must(h.stage(blockID, blockStaging, blockCap(snw), nil), "stage block")
	pods := h.mkdir("pods")
	aFile := filepath.Join(pods, "a-file")
	h.must(os.WriteFile(aFile, nil, 0o600), "create a file")
	foreign := h.mkdir("pods", "foreign")
	h.must(unix.Mount("tmpfs", foreign, "tmpfs", 0, "size=1m"), "mount a tmpfs")

	tests := []struct {
		name    string
		id      string
		staging string
		target  string
		c       *csi.VolumeCapability
		code    codes.Code
		want    string
	}{
		{"no staging_target_path", mountID, "", filepath.Join(pods, "t"), mountCap(snw), codes.FailedPrecondition, "call NodeStageVolume first"},
		{"not staged there", mountID, h.mkdir("staging", "elsewhere"), filepath.Join(pods, "t"), mountCap(snw), codes.FailedPrecondition, "is not staged at staging_target_path \"" + h.dir + "/staging/elsewhere\""},
		{"staged as a file system, published as block", mountID, mountStaging, filepath.Join(pods, "t"), blockCap(snw), codes.FailedPrecondition, "as a file system"},
		{"staged as block, published as a file system", blockID, blockStaging, filepath.Join(pods, "t"), mountCap(snw), codes.FailedPrecondition, "as a block device"},
		{"parent of target missing", mountID, mountStaging, filepath.Join(pods, "no", "t"), mountCap(snw), codes.FailedPrecondition, "parent directory"},
		{"target is a file", mountID, mountStaging, aFile, mountCap(snw), codes.AlreadyExists, "not a directory"},
		{"target has another mount", mountID, mountStaging, foreign, mountCap(snw), codes.AlreadyExists, "tmpfs"},
		{"unsupported access mode", mountID, mountStaging, filepath.Join(pods, "t"), mountCap(mnmw), codes.FailedPrecondition, "not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, h.publish(tc.id, tc.staging, tc.target, tc.c, false), tc.code, tc.want)
		})
	}
	if _, err := os.Stat(filepath.Join(pods, "t")); !os.IsNotExist(err) {
		t.Errorf("a refused publish left target_path behind: %v", err)
	}
}

func TestNodeUnpublish(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	id := h.createVolume("pvc-1", mountCap(snw), testVolumeBytes)
	pods := h.mkdir("pods")

	t.Run("not published", func(t *testing.T) {
		wantCode(t, h.unpublish(id, filepath.Join(pods, "never")), codes.OK)
	})
	t.Run("stacked mounts", func(t *testing.T) {
		target := filepath.Join(pods, "stacked")
		staging := h.stageAndPublish(id, mountCap(snw), target, false)
		h.must(unix.Mount("tmpfs", target, "tmpfs", 0, "size=1m"), "mount a tmpfs on top")
		h.must(h.unpublish(id, target), "unpublish")
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Fatalf("target_path still exists: %v", err)
		}
		h.must(h.unstage(id, staging), "unstage")
		h.assertReleased()
	})
	t.Run("a directory with files it did not put there", func(t *testing.T) {
		target := h.mkdir("pods", "full")
		h.must(os.WriteFile(filepath.Join(target, "precious"), nil, 0o600), "write")
		wantCode(t, h.unpublish(id, target), codes.FailedPrecondition, "still holds files")
	})
}

// TestNodePublishMountFlags: the per-mount flags of mount_flags apply to the publication too.
func TestNodePublishMountFlags(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	c := mountCap(snw)
	c.GetMount().MountFlags = []string{"noexec", "nosuid,noatime"}
	id := h.createVolume("pvc-1", c, testVolumeBytes)
	target := filepath.Join(h.mkdir("pods"), "t")
	staging := h.stageAndPublish(id, c, target, false)
	for _, path := range []string{staging, target} {
		ms := mountsAt(t, path)
		if len(ms) != 1 {
			t.Fatalf("%d mounts at %s, want 1", len(ms), path)
		}
		opts := strings.Split(ms[0].Options, ",")
		for _, want := range []string{"noexec", "nosuid", "noatime"} {
			if !slices.Contains(opts, want) {
				t.Errorf("%s is mounted %s, without %s", path, ms[0].Options, want)
			}
		}
	}
	h.must(h.unpublish(id, target), "unpublish")
	h.must(h.unstage(id, staging), "unstage")
	h.assertReleased()
}
