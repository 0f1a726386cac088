package main

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestProcessTreeFindsChildren(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	tree, err := processTree(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if tree[0] != os.Getpid() || !slices.Contains(tree, child.Process.Pid) {
		t.Errorf("tree of %d is %v, want it first and its child %d in it", os.Getpid(), tree, child.Process.Pid)
	}
}

func TestTreeCPUAndMemoryOfThisProcess(t *testing.T) {
	busy := 0
	for i := range 50_000_000 {
		busy += i
	}
	cpu, err := treeCPU(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Errorf("treeCPU = %v, %v; want some CPU after a busy loop (%d)", cpu, err, busy)
	}
	rss, peak, err := treeMemory(os.Getpid())
	if err != nil || rss <= 0 || peak < rss {
		t.Errorf("treeMemory = %d, %d, %v; want 0 < rss <= peak", rss, peak, err)
	}
}

func TestStatusKiB(t *testing.T) {
	status := []byte("Name:\tcsi-gateway\nVmHWM:\t   27956 kB\nVmRSS:\t   19136 kB\n")
	if got := statusKiB(status, "VmRSS:"); got != 19136 {
		t.Errorf("VmRSS = %d, want 19136", got)
	}
	if got := statusKiB(status, "VmSwap:"); got != 0 {
		t.Errorf("VmSwap (absent) = %d, want 0", got)
	}
}
