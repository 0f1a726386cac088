//go:build linux

package embedded

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMountFlags(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		flags   uintptr
		data    string
		wantErr string
	}{
		{"none", nil, 0, "", ""},
		{"generic flags", []string{"noatime", "nosuid,nodev"}, unix.MS_NOATIME | unix.MS_NOSUID | unix.MS_NODEV, "", ""},
		{"later wins", []string{"ro", "rw", "noexec,exec"}, 0, "", ""},
		{"file system options", []string{"discard", "data=ordered,errors=remount-ro"}, 0, "discard,data=ordered,errors=remount-ro", ""},
		{"mixed, spaces and empties", []string{" ro ,, discard", "", "defaults"}, unix.MS_RDONLY, "discard", ""},
		{"bind refused", []string{"bind"}, 0, "", `"bind" is not allowed`},
		{"propagation refused", []string{"noatime,rshared"}, 0, "", `"rshared" is not allowed`},
		{"NUL refused", []string{"a\x00b"}, 0, "", "NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMountFlags(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.flags != tc.flags || got.data != tc.data {
				t.Fatalf("got flags %#x data %q, want %#x %q", got.flags, got.data, tc.flags, tc.data)
			}
		})
	}
}

// FuzzParseMountFlags: mount_flags come from the CO; whatever they hold, the parser returns
// options without NUL bytes and never a flag that changes what a mount is.
func FuzzParseMountFlags(f *testing.F) {
	for _, s := range []string{"", "ro", "noatime,discard", "bind", "a=b,c", "\x00", ",,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseMountFlags(strings.Split(s, ";"))
		if err != nil {
			return
		}
		if strings.IndexByte(o.data, 0) >= 0 {
			t.Fatalf("data %q holds a NUL byte", o.data)
		}
		if o.flags&(unix.MS_BIND|unix.MS_REMOUNT|unix.MS_MOVE|unix.MS_SHARED|unix.MS_PRIVATE|unix.MS_SLAVE|unix.MS_UNBINDABLE|unix.MS_REC) != 0 {
			t.Fatalf("flags %#x change what a mount is", o.flags)
		}
	})
}

func TestInheritedFlags(t *testing.T) {
	got := inheritedFlags(unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_RELATIME | unix.ST_SYNCHRONOUS)
	if want := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_RELATIME); got != want {
		t.Fatalf("got %#x, want %#x (synchronous belongs to the file system, not the mount point)", got, want)
	}
}

// TestBindMountReadOnly: a read-only bind mount of a writable directory refuses writes while
// its source stays writable, and unmount is fine with a path that is no mount point.
func TestBindMountReadOnly(t *testing.T) {
	needsRoot(t)
	h := newNodeHarness(t)
	src, dst := h.mkdir("src"), h.mkdir("dst")
	h.must(bindMount(src, dst, mountOptions{}.withReadonly(true)), "bind")
	if err := unix.Access(dst, unix.W_OK); err == nil {
		t.Error("the read-only bind mount is writable")
	}
	if err := unix.Access(src, unix.W_OK); err != nil {
		t.Errorf("the source became read-only: %v", err)
	}
	h.must(unmount(dst), "unmount")
	h.must(unmount(dst), "unmount what is no mount point")
	h.assertReleased()
}
