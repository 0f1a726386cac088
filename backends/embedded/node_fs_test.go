package embedded

import (
	"encoding/binary"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"testing"
)

func superblock(blocksLo, logBS, incompat, blocksHi uint32) []byte {
	sb := make([]byte, sbSize)
	le := binary.LittleEndian
	le.PutUint16(sb[sbMagic:], ext4Magic)
	le.PutUint32(sb[sbBlocksCountLo:], blocksLo)
	le.PutUint32(sb[sbLogBlockSize:], logBS)
	le.PutUint32(sb[sbFeatureIncompat:], incompat)
	le.PutUint32(sb[sbBlocksCountHi:], blocksHi)
	return sb
}

func TestParseExt4Size(t *testing.T) {
	tests := []struct {
		name    string
		sb      []byte
		want    int64
		wantErr bool
	}{
		{"1 KiB blocks", superblock(65536, 0, 0, 0), 64 << 20, false},
		{"4 KiB blocks", superblock(262144, 2, 0, 0), 1 << 30, false},
		{"high word ignored without 64bit", superblock(1, 2, 0, 1), 4096, false},
		{"64bit", superblock(0, 2, incompat64Bit, 1), 1 << 44, false},
		{"not ext4", make([]byte, sbSize), 0, true},
		{"short", []byte{1, 2, 3}, 0, true},
		{"absurd block size", superblock(1, 40, 0, 0), 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseExt4Size(tc.sb)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("got %d %v, want %d (error %t)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// FuzzParseExt4Size: a superblock read from a volume is untrusted; no input may panic or
// give a negative size.
func FuzzParseExt4Size(f *testing.F) {
	f.Add(superblock(65536, 0, 0, 0))
	f.Add(superblock(0, 6, incompat64Bit, 0xffffffff))
	f.Fuzz(func(t *testing.T, sb []byte) {
		if size, err := parseExt4Size(sb); err == nil && size < 0 {
			t.Fatalf("size %d", size)
		}
	})
}

// TestFileSystemTools: blkid finds nothing on a blank device and ext4 after mkfs; the
// superblock gives the device's size; an offline grow follows the device.
func TestFileSystemTools(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	id := h.createVolume("pvc-1", mountCap(snw), testVolumeBytes)
	vol, err := h.n.volume(id)
	h.must(err, "volume")
	dev, err := h.n.loopFor(bgCtx, vol.image, false)
	h.must(err, "attach")

	if fs, pt, err := h.n.probeFS(bgCtx, dev.path); err != nil || fs != "" || pt != "" {
		t.Fatalf("blank device probes as %q/%q (%v), want nothing", fs, pt, err)
	}
	h.must(h.n.makeFS(bgCtx, dev.path), "mkfs")
	if fs, _, err := h.n.probeFS(bgCtx, dev.path); err != nil || fs != "ext4" {
		t.Fatalf("probes as %q (%v), want ext4", fs, err)
	}
	if size, err := fsSize(dev.path); err != nil || size != testVolumeBytes {
		t.Fatalf("file system size %d (%v), want %d", size, err, testVolumeBytes)
	}
	_, err = h.ctrl.ControllerExpandVolume(bgCtx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * testVolumeBytes}})
	h.must(err, "controller expand")
	h.must(h.n.refreshLoop(bgCtx, dev), "refresh")
	h.must(h.n.growToDevice(bgCtx, dev), "grow")
	if size, err := fsSize(dev.path); err != nil || size != 2*testVolumeBytes {
		t.Fatalf("file system size %d (%v) after growing, want %d", size, err, 2*testVolumeBytes)
	}
	h.must(h.n.releaseLoops(bgCtx, vol.image), "release")
	h.assertReleased()
}
