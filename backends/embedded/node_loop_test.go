package embedded

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseLoopList(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []loopDevice
		wantErr bool
	}{
		{"none", "", nil, false},
		{"two", "/dev/loop1   7:1    1\n/dev/loop0   7:0    0\n", []loopDevice{
			{path: "/dev/loop1", major: 7, minor: 1, readonly: true},
			{path: "/dev/loop0", major: 7, minor: 0},
		}, false},
		{"blank lines", "\n/dev/loop12 7:12 0\n\n", []loopDevice{{path: "/dev/loop12", major: 7, minor: 12}}, false},
		{"missing column", "/dev/loop0 7:0\n", nil, true},
		{"bad numbers", "/dev/loop0 seven:0 0\n", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLoopList(tc.out)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %t", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLoopDevices: a device is reused per read-only-ness, sees its image grow once refreshed,
// and is detached when no mount uses it; a loop device of a file outside the appliance is
// never taken for one of its own.
func TestLoopDevices(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	id := h.createVolume("pvc-1", blockCap(snw), testVolumeBytes)
	vol, err := h.n.volume(id)
	h.must(err, "volume")

	rw, err := h.n.loopFor(bgCtx, vol.image, false)
	h.must(err, "attach")
	again, err := h.n.loopFor(bgCtx, vol.image, false)
	h.must(err, "reuse")
	if again != rw {
		t.Fatalf("a second loopFor attached %v; want %v reused", again, rw)
	}
	ro, err := h.n.loopFor(bgCtx, vol.image, true)
	h.must(err, "attach read-only")
	if ro == rw || !ro.readonly {
		t.Fatalf("read-only device %v; want a second, read-only device", ro)
	}
	if d, ok := h.n.loopByNumber(rw.major, rw.minor); !ok || d.path != rw.path {
		t.Fatalf("loopByNumber(%d, %d) = %v %t, want %v", rw.major, rw.minor, d, ok, rw)
	}

	h.must(os.Truncate(vol.image, 2*testVolumeBytes), "grow the image")
	h.must(h.n.refreshLoop(bgCtx, rw), "refresh")
	if size, err := loopSize(rw); err != nil || size != 2*testVolumeBytes {
		t.Fatalf("size %d (%v), want %d", size, err, 2*testVolumeBytes)
	}

	foreign := filepath.Join(h.dir, "foreign.img")
	h.must(os.WriteFile(foreign, make([]byte, 1<<20), 0o600), "make a foreign image")
	other, err := h.n.loopFor(bgCtx, foreign, false)
	h.must(err, "attach a foreign image")
	if _, ok := h.n.loopByNumber(other.major, other.minor); ok {
		t.Fatalf("loopByNumber took %v, backed by a file outside the appliance, for its own", other)
	}

	h.must(h.n.releaseLoops(bgCtx, vol.image), "release")
	h.must(h.n.releaseLoops(bgCtx, foreign), "release the foreign device")
	h.assertReleased()
}
