package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// realLeftovers takes the real machine's leftovers since s and keeps those that mention what:
// other jobs on the machine add their own, which this test does not judge.
func realLeftovers(t *testing.T, s snapshot, what string) []string {
	t.Helper()
	h := host{root: "/", self: os.Getpid()}
	m, err := h.read()
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(findLeftovers(h, s, m), func(l string) bool { return !strings.Contains(l, what) })
}

// TestRealProcess: a process started after the snapshot is reported, by the run's token or by its
// working directory under the checkout, and no longer once it has ended.
func TestRealProcess(t *testing.T) {
	checkoutDir := t.TempDir()
	run := "leftovers-test-" + strconv.Itoa(os.Getpid())
	s, err := takeSnapshot(host{root: "/", self: os.Getpid()}, run, checkoutDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		env       []string
		why       string
	}{
		{name: "token", dir: "/", env: []string{runEnv + "=" + run}, why: "(env " + runEnv + ")"},
		{name: "cwd", dir: checkoutDir, why: "(cwd " + checkoutDir + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "3600")
			cmd.Dir, cmd.Env = tc.dir, append(os.Environ(), tc.env...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			self := "process " + strconv.Itoa(cmd.Process.Pid) + ":"
			want := []string{self + " sleep 3600 " + tc.why}
			if got := realLeftovers(t, s, self); !slices.Equal(got, want) {
				t.Fatalf("with the process running: %q, want %q", got, want)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if got := realLeftovers(t, s, self); len(got) != 0 {
				t.Fatalf("after it ended: %q", got)
			}
		})
	}
	// The same process started without the token, elsewhere, is someone else's.
	cmd := exec.Command("sleep", "3600")
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if got := realLeftovers(t, s, "process "+strconv.Itoa(cmd.Process.Pid)+":"); len(got) != 0 {
		t.Fatalf("another job's process counted: %q", got)
	}
}

// TestRealBindMount: a bind mount made after the snapshot is reported until it is unmounted.
func TestRealBindMount(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIPPED: not root, so no bind mount: run as root to check that mounts are seen")
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := takeSnapshot(host{root: "/", self: os.Getpid()}, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = syscall.Unmount(dst, syscall.MNT_DETACH)
		}
	})
	if got := realLeftovers(t, s, dst); len(got) != 1 || !strings.HasPrefix(got[0], "mount "+dst+" (") {
		t.Fatalf("with the bind mount: %q, want one mount of %s", got, dst)
	}
	if err := syscall.Unmount(dst, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	if got := realLeftovers(t, s, dst); len(got) != 0 {
		t.Fatalf("after unmounting: %q", got)
	}
}
