package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

var errLeftovers = errors.New("the run left things behind")

// pollEvery is how often check looks again while leftovers remain within the grace.
const pollEvery = 500 * time.Millisecond

// check waits up to grace for the machine to hold nothing the run added, then reports what remains.
func check(h host, s snapshot, grace time.Duration, ignore *regexp.Regexp, out io.Writer) error {
	deadline := time.Now().Add(grace)
	for {
		m, err := h.read()
		if err != nil {
			return err
		}
		var found []string
		for _, l := range findLeftovers(h, s, m) {
			if ignore == nil || !ignore.MatchString(l) {
				found = append(found, l)
			}
		}
		if len(found) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			fmt.Fprintf(out, "leftovers: the run left %d thing(s) behind (still there after %v):\n", len(found), grace)
			for _, l := range found {
				fmt.Fprintln(out, "  "+l)
			}
			return errLeftovers
		}
		time.Sleep(pollEvery)
	}
}

// findLeftovers lists, one line each, what m holds that s did not and that is the run's.
func findLeftovers(h host, s snapshot, m machine) []string {
	var lines []string
	ours := map[int]bool{}
	oursNetns := map[string]bool{}
	excluded := ancestors(h.self, m.processes)
	before := set(s.Processes)
	for _, p := range m.processes {
		if before[p.key()] || excluded[p.pid] {
			continue
		}
		if why := p.ours(s.Run, s.Root); why != "" {
			ours[p.pid] = true
			oursNetns[p.netns] = true
			lines = append(lines, fmt.Sprintf("%s (%s)", p, why))
		}
	}
	netnsBefore := set(s.NetNS)
	for _, p := range m.processes {
		if ours[p.pid] && p.netns != "" && !netnsBefore[p.netns] {
			lines = append(lines, fmt.Sprintf("netns %s held by process %d", p.netns, p.pid))
			netnsBefore[p.netns] = true // once per namespace
		}
	}
	mountsBefore := set(s.Mounts)
	for _, x := range m.mounts {
		// A namespace's bind mount (ip netns add) goes with the namespace.
		if !mountsBefore[x.key()] && (x.fstype != "nsfs" || !heldOnlyByOthers(x.root, m.processes, oursNetns)) {
			lines = append(lines, x.String())
		}
	}
	lines = appendNew(lines, s.Loops, m.loops, loop.key)
	names := set(s.NetnsName)
	for _, n := range m.netnsName {
		if !names[n.name] && !heldOnlyByOthers(n.netns, m.processes, oursNetns) {
			lines = append(lines, n.String())
		}
	}
	cgroupsBefore := set(s.Cgroups)
	var added []string
	for _, c := range m.cgroups {
		if !cgroupsBefore[c] && !inside(c, added) {
			added = append(added, c)
			if !cgroupOthers(h.cgroupPIDs(c), ours) {
				lines = append(lines, "cgroup /sys/fs/cgroup/"+c)
			}
		}
	}
	return appendNew(lines, s.Links, m.links, link.key)
}

// appendNew adds the line of every item whose key the snapshot did not hold.
func appendNew[T fmt.Stringer](lines, before []string, now []T, key func(T) string) []string {
	old := set(before)
	for _, x := range now {
		if !old[key(x)] {
			lines = append(lines, x.String())
		}
	}
	return lines
}

// ancestors is pid and every process above it: the checker, its shell, make.
func ancestors(pid int, ps []process) map[int]bool {
	parent := map[int]int{}
	for _, p := range ps {
		parent[p.pid] = p.ppid
	}
	out := map[int]bool{}
	for pid > 0 && !out[pid] {
		out[pid] = true
		pid = parent[pid]
	}
	return out
}

// heldOnlyByOthers: some process is in the namespace (net:[INODE]) and none of them is the run's.
func heldOnlyByOthers(netns string, ps []process, oursNetns map[string]bool) bool {
	if netns == "" || oursNetns[netns] {
		return false
	}
	return slices.ContainsFunc(ps, func(p process) bool { return p.netns == netns })
}

// cgroupOthers: the cgroup holds processes and none of them is the run's.
func cgroupOthers(pids []int, ours map[int]bool) bool {
	return len(pids) > 0 && !slices.ContainsFunc(pids, func(pid int) bool { return ours[pid] })
}

// inside reports whether the cgroup c is below one of dirs (only the topmost added one is reported).
func inside(c string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return strings.HasPrefix(c, d+"/") })
}

func set(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}
