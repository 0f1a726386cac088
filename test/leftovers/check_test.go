package main

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	token    = "canary-run-7f3a"
	checkout = "/work/checkout"
)

// TestFindLeftovers: each kind, taken from a fixture tree before and after a change.
func TestFindLeftovers(t *testing.T) {
	tests := []struct {
		name   string
		before func(f fixture) // on top of a base of pid 1 and the checker (pid 50, child of 40, child of 1)
		after  func(f fixture)
		want   []string
	}{
		{name: "nothing added", after: func(fixture) {}},
		{
			name: "processes: by token, by cwd, by exe; not others'",
			after: func(f fixture) {
				f.process(fixtureProcess{pid: 100, ppid: 1, start: 900, args: "etcd --data-dir x", cwd: "/", exe: "/tmp/cache/etcd", env: "CSIGWTEST_LEFTOVERS_RUN=" + token})
				f.process(fixtureProcess{pid: 101, ppid: 1, start: 900, args: "mock-driver", cwd: checkout + "/test/e2e", exe: "/tmp/go-build1/mock"})
				f.process(fixtureProcess{pid: 102, ppid: 1, start: 900, args: "csi-gateway serve", cwd: "/", exe: checkout + "/bin/csi-gateway"})
				f.process(fixtureProcess{pid: 103, ppid: 1, start: 900, args: "kubelet", cwd: "/work/other", exe: "/root/.cache/csi-gateway-e2e/kubelet", env: "CSIGWTEST_LEFTOVERS_RUN=another-run"})
				f.process(fixtureProcess{pid: 104, ppid: 1, start: 900, args: "sleep", cwd: checkout + "-other/x", exe: "/usr/bin/sleep"})
			},
			want: []string{
				"process 100: etcd --data-dir x (env CSIGWTEST_LEFTOVERS_RUN)",
				"process 101: mock-driver (cwd /work/checkout/test/e2e)",
				"process 102: csi-gateway serve (exe /work/checkout/bin/csi-gateway)",
			},
		},
		{
			name:   "a process from before is not one; a reused PID is",
			before: func(f fixture) { f.process(fixtureProcess{pid: 100, ppid: 1, start: 5, args: "old", cwd: checkout}) },
			after: func(f fixture) {
				f.remove("proc/100")
				f.process(fixtureProcess{pid: 100, ppid: 1, start: 6, args: "new", cwd: checkout})
			},
			want: []string{"process 100: new (cwd /work/checkout)"},
		},
		{
			name: "the checker and its ancestors are not leftovers",
			after: func(f fixture) {
				f.process(fixtureProcess{pid: 40, ppid: 1, start: 900, args: "bash -c leftovers check", cwd: checkout, env: "CSIGWTEST_LEFTOVERS_RUN=" + token})
				f.process(fixtureProcess{pid: 50, ppid: 40, start: 900, args: "leftovers check", cwd: checkout, env: "CSIGWTEST_LEFTOVERS_RUN=" + token})
			},
		},
		{
			name: "a kernel thread is shown by its name",
			after: func(f fixture) {
				f.process(fixtureProcess{pid: 100, ppid: 2, start: 900, cwd: checkout})
			},
			want: []string{"process 100: [co mm)] (cwd /work/checkout)"},
		},
		{
			name: "a new namespace held by a leftover process",
			after: func(f fixture) {
				f.process(fixtureProcess{pid: 100, ppid: 1, start: 900, args: "nomad agent", cwd: checkout, netns: "net:[4026532999]"})
			},
			want: []string{"process 100: nomad agent (cwd /work/checkout)", "netns net:[4026532999] held by process 100"},
		},
		{
			name: "mounts",
			after: func(f fixture) {
				f.write("proc/self/mountinfo", "22 1 0:21 / / rw - ext4 /dev/vda rw\n"+
					`301 22 7:3 / /tmp/Test\040x/001/staging rw,relatime shared:1 - ext4 /dev/loop3 rw`+"\n"+
					"302 22 0:5 /data /var/lib/kubelet/pods/x rw - tmpfs tmpfs rw\n")
			},
			want: []string{"mount /tmp/Test x/001/staging (ext4 /dev/loop3, root /)", "mount /var/lib/kubelet/pods/x (tmpfs tmpfs, root /data)"},
		},
		{
			name:   "loop devices: attached ones only",
			before: func(f fixture) { f.mkdir("sys/block/loop0") },
			after: func(f fixture) {
				f.write("sys/block/loop0/loop/backing_file", "/tmp/TestNode1/001/vol.img\n")
				f.mkdir("sys/block/loop1")
			},
			want: []string{"loop /dev/loop0 backing /tmp/TestNode1/001/vol.img"},
		},
		{
			name:   "network namespaces by name and their mounts: not one only others' processes are in",
			before: func(f fixture) { f.write("run/netns/old", "") },
			after: func(f fixture) {
				f.write("run/netns/csigw-node-1", "")
				f.write("run/netns/theirs", "")
				f.process(fixtureProcess{pid: 103, ppid: 1, start: 900, args: "kubelet", cwd: "/work/other", netns: f.inode("run/netns/theirs")})
				f.write("proc/self/mountinfo", "22 1 0:21 / / rw - ext4 /dev/vda rw\n"+
					"401 22 0:4 net:[4026532001] /run/netns/csigw-node-1 rw - nsfs nsfs rw\n"+
					"402 22 0:4 "+f.inode("run/netns/theirs")+" /run/netns/theirs rw - nsfs nsfs rw\n")
			},
			want: []string{"mount /run/netns/csigw-node-1 (nsfs nsfs, root net:[4026532001])", "netns csigw-node-1 (/run/netns/csigw-node-1)"},
		},
		{
			name:   "cgroups: the topmost added; not one that holds only others' processes",
			before: func(f fixture) { f.mkdir("sys/fs/cgroup/memory/system.slice") },
			after: func(f fixture) {
				f.mkdir("sys/fs/cgroup/memory/system.slice/csigw-test/inner")
				f.write("sys/fs/cgroup/unified/kubepods/cgroup.procs", "103\n")
				f.write("sys/fs/cgroup/unified/ours/cgroup.procs", "100\n103\n")
				f.process(fixtureProcess{pid: 100, ppid: 1, start: 900, args: "containerd", cwd: checkout})
				f.process(fixtureProcess{pid: 103, ppid: 1, start: 900, args: "kubelet", cwd: "/work/other"})
			},
			want: []string{
				"process 100: containerd (cwd /work/checkout)",
				"cgroup /sys/fs/cgroup/memory/system.slice/csigw-test",
				"cgroup /sys/fs/cgroup/unified/ours",
			},
		},
		{
			name: "links: a bridge, a veth end",
			after: func(f fixture) {
				f.write("sys/class/net/cni0/ifindex", "7")
				f.mkdir("sys/class/net/cni0/bridge")
				f.write("sys/class/net/veth1/ifindex", "8")
			},
			want: []string{"link cni0 (bridge)", "link veth1 (interface)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.process(fixtureProcess{pid: 1, start: 1, args: "init", cwd: "/"})
			if tc.before != nil {
				tc.before(f)
			}
			s, err := takeSnapshot(f.host(50), token, checkout)
			if err != nil {
				t.Fatal(err)
			}
			tc.after(f)
			m, err := f.host(50).read()
			if err != nil {
				t.Fatal(err)
			}
			if got := findLeftovers(f.host(50), s, m); !slices.Equal(got, tc.want) {
				t.Errorf("leftovers:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestCheckReports: what remains after the grace is printed, one line each, and fails the check;
// -ignore drops what it matches.
func TestCheckReports(t *testing.T) {
	f, s := loopAttachedAfterSnapshot(t)
	f.write("run/netns/kept", "")
	var out bytes.Buffer
	err := check(f.host(50), s, 0, regexp.MustCompile(`^netns kept `), &out)
	if !errors.Is(err, errLeftovers) {
		t.Fatalf("check: %v, want errLeftovers", err)
	}
	want := "leftovers: the run left 1 thing(s) behind (still there after 0s):\n  loop /dev/loop2 backing /tmp/a.img\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// loopAttachedAfterSnapshot: a fixture, its snapshot, then a loop device attached.
func loopAttachedAfterSnapshot(t *testing.T) (fixture, snapshot) {
	f := newFixture(t)
	s, err := takeSnapshot(f.host(50), token, checkout)
	if err != nil {
		t.Fatal(err)
	}
	f.write("sys/block/loop2/loop/backing_file", "/tmp/a.img")
	return f, s
}

// TestCheckWaitsForWhatGoes: a leftover that goes within the grace is none.
func TestCheckWaitsForWhatGoes(t *testing.T) {
	f, s := loopAttachedAfterSnapshot(t)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() { done <- check(f.host(50), s, time.Hour, nil, &out) }()
	time.Sleep(2 * pollEvery) // not an assertion: check finds the loop device at least once first, usually
	f.remove("sys/block/loop2/loop")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("check: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("check still waiting a minute after the leftover went")
	}
}

// TestRunUsage: the command line is checked.
func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"list"}, {"snapshot"}, {"check", "a", "b"}, {"check", "-ignore", "(", "f"}} {
		var out bytes.Buffer
		if err := run(args, &out, &out); err == nil || errors.Is(err, errLeftovers) {
			t.Errorf("run %q: %v, want a usage error", args, err)
		}
	}
	if err := run([]string{"check", t.TempDir() + "/missing.json"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "leftovers snapshot FILE") {
		t.Errorf("check without a snapshot: %v", err)
	}
}
