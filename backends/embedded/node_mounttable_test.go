package embedded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
)

func TestMountTableLookups(t *testing.T) {
	tab := mountTable{
		{Mountpoint: "/", Major: 8, Minor: 1, Root: "/", Options: "rw"},
		{Mountpoint: "/stage", Major: 7, Minor: 3, Root: "/", Options: "rw,relatime", VFSOptions: "rw"},
		{Mountpoint: "/target", Major: 7, Minor: 3, Root: "/", Options: "ro,relatime", VFSOptions: "rw"},
		{Mountpoint: "/target", Major: 0, Minor: 40, Root: "/", Options: "rw", FSType: "tmpfs"},
	}
	devs := []loopDevice{{path: "/dev/loop3", major: 7, minor: 3}}
	if got := tab.top("/target"); got != tab[3] {
		t.Errorf("top of /target is %v, want the tmpfs stacked last", got)
	}
	if n := len(tab.at("/target")); n != 2 {
		t.Errorf("%d mounts at /target, want 2", n)
	}
	if tab.top("/nowhere") != nil {
		t.Error("a path that is no mount point has a top mount")
	}
	if d, m, ok := tab.fileSystemAt("/stage", devs); !ok || d != devs[0] || m != tab[1] {
		t.Errorf("fileSystemAt(/stage) = %v %v %t", d, m, ok)
	}
	if _, _, ok := tab.fileSystemAt("/target", devs); ok {
		t.Error("fileSystemAt(/target) looked under the tmpfs on top")
	}
	if got := tab.mountPointsOf(devs, "/stage"); len(got) != 1 || got[0] != "/target" {
		t.Errorf("mountPointsOf skipping /stage = %v, want [/target]", got)
	}
	if !readOnlyMount(tab[2]) || readOnlyMount(tab[1]) {
		t.Error("readOnlyMount misreads the per-mount options")
	}
	if readOnlyFileSystem(tab[2]) || !readOnlyFileSystem(&mountinfo.Info{VFSOptions: "ro,errors=continue"}) {
		t.Error("readOnlyFileSystem misreads the superblock options")
	}
}

func TestResolvePathAndExistsAs(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	wantReal, _ := filepath.EvalSymlinks(real)
	for in, want := range map[string]string{
		link:                         wantReal,
		link + "/":                   wantReal,
		filepath.Join(link, "new"):   filepath.Join(wantReal, "new"), // not there yet: its parent resolves
		filepath.Join(link, "a/b/c"): filepath.Join(link, "a/b/c"),   // nothing to resolve against
	} {
		if got := resolvePath(in); got != want {
			t.Errorf("resolvePath(%q) = %q, want %q", in, got, want)
		}
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{real: "dir", file: "file", link: "other", filepath.Join(dir, "none"): ""} {
		if got, err := existsAs(path); err != nil || got != want {
			t.Errorf("existsAs(%q) = %q %v, want %q", path, got, err, want)
		}
	}
}
