package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100 on every Linux
// architecture Go supports.
const clockTick = 10 * time.Millisecond

// procStat is what the bench reads from /proc/PID/stat.
type procStat struct {
	ppid int
	// cpu is utime+stime, plus cutime+cstime: the CPU of children already reaped, which
	// /proc no longer lists (socat forks one child per connection).
	cpu time.Duration
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold spaces: the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return procStat{ppid: ppid, cpu: time.Duration(ticks) * clockTick}, nil
}

// processTree returns root and every process descended from it.
func processTree(root int) ([]int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue // it exited meanwhile
		}
		children[st.ppid] = append(children[st.ppid], pid)
	}
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree, nil
}

// treeCPU returns the CPU time root's process tree has used so far.
func treeCPU(root int) (time.Duration, error) {
	tree, err := processTree(root)
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, pid := range tree {
		st, err := readProcStat(pid)
		if err != nil {
			if pid == root {
				return 0, err
			}
			continue
		}
		total += st.cpu
	}
	return total, nil
}

// treeMemory returns the resident set of root's process tree now (VmRSS) and at its peak
// (VmHWM), each summed over the processes alive, in bytes.
func treeMemory(root int) (rss, peak int64, err error) {
	tree, err := processTree(root)
	if err != nil {
		return 0, 0, err
	}
	for _, pid := range tree {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			if pid == root {
				return 0, 0, err
			}
			continue
		}
		rss += statusKiB(b, "VmRSS:") << 10
		peak += statusKiB(b, "VmHWM:") << 10
	}
	return rss, peak, nil
}

// statusKiB returns the value, in kB, of the line of /proc/PID/status that starts with key.
func statusKiB(status []byte, key string) int64 {
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
