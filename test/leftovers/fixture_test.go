package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// fixture builds a host tree (proc, sys, run) in a temporary directory.
type fixture struct {
	t    *testing.T
	root string
}

func newFixture(t *testing.T) fixture {
	f := fixture{t: t, root: t.TempDir()}
	for _, d := range []string{"proc/self", "sys/block", "sys/class/net/lo", "sys/fs/cgroup/unified", "run/netns"} {
		f.mkdir(d)
	}
	f.write("proc/self/mountinfo", "22 1 0:21 / / rw - ext4 /dev/vda rw\n")
	f.write("sys/class/net/lo/ifindex", "1")
	return f
}

func (f fixture) host(self int) host { return host{root: f.root, self: self} }

func (f fixture) mkdir(rel string) {
	if err := os.MkdirAll(filepath.Join(f.root, rel), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) write(rel, content string) {
	f.mkdir(filepath.Dir(rel))
	if err := os.WriteFile(filepath.Join(f.root, rel), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) symlink(rel, target string) {
	f.mkdir(filepath.Dir(rel))
	if err := os.Symlink(target, filepath.Join(f.root, rel)); err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) remove(rel string) {
	if err := os.RemoveAll(filepath.Join(f.root, rel)); err != nil {
		f.t.Fatal(err)
	}
}

// fixtureProcess describes a /proc/PID entry.
type fixtureProcess struct {
	pid, ppid  int
	start      int
	args       string // NUL-separated on disk
	cwd, exe   string
	env, netns string
}

func (f fixture) process(p fixtureProcess) {
	dir := fmt.Sprintf("proc/%d/", p.pid)
	f.write(dir+"stat", fmt.Sprintf("%d (%s) S %d 1 1 0 -1 4194560 100 0 0 0 1 1 0 0 20 0 1 0 %d 1000 100", p.pid, "co mm)", p.ppid, p.start))
	f.write(dir+"cmdline", nulJoin(p.args))
	f.write(dir+"environ", nulJoin(p.env))
	f.symlink(dir+"cwd", p.cwd)
	if p.exe != "" { // a kernel thread's cannot be read
		f.symlink(dir+"exe", p.exe)
	}
	if p.netns == "" {
		p.netns = "net:[4026531840]"
	}
	f.symlink(dir+"ns/net", p.netns)
}

func nulJoin(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ' ' {
			b[i] = 0
		}
	}
	return string(b)
}

// inode is the inode of a fixture file, as net:[INODE].
func (f fixture) inode(rel string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(f.root, rel), &st); err != nil {
		f.t.Fatal(err)
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}
