package main

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// readCgroups lists every cgroup directory under /sys/fs/cgroup (each v1 hierarchy and the v2
// tree), relative to it. Symbolic links (cpu -> cpu,cpuacct) are not followed.
func (h host) readCgroups() ([]string, error) {
	base := h.path("sys/fs/cgroup")
	var out []string
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if d.IsDir() && path != base {
			rel, _ := filepath.Rel(base, path)
			out = append(out, rel)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// cgroupPIDs lists the processes in a cgroup and its descendants.
func (h host) cgroupPIDs(rel string) []int {
	var pids []int
	_ = filepath.WalkDir(h.path("sys/fs/cgroup/"+rel), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		for _, f := range strings.Fields(readFileTrim(filepath.Join(path, "cgroup.procs"))) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}
