package main

import (
	"os"
	"path/filepath"
	"strings"
)

// host reads a machine's state: the real one under "/", or a fixture tree in the tests.
type host struct {
	root string
	self int // the checker's PID: it and its ancestors are never leftovers
}

func (h host) path(p string) string { return filepath.Join(h.root, p) }

// readDir lists dir below the host's root and keeps what read makes of each entry's name;
// read answers false for an entry that is not one of T (a /proc entry that is no PID).
func readDir[T any](h host, dir string, read func(name string) (T, bool)) ([]T, error) {
	entries, err := os.ReadDir(h.path(dir))
	if err != nil {
		return nil, err
	}
	var out []T
	for _, e := range entries {
		if v, ok := read(e.Name()); ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// machine is what the checker looks at, read at one moment.
type machine struct {
	processes []process
	mounts    []mount
	loops     []loop
	netnsName []netnsName
	cgroups   []string
	links     []link
}

func (h host) read() (machine, error) {
	var m machine
	var err error
	if m.processes, err = h.readProcesses(); err != nil {
		return m, err
	}
	if m.mounts, err = h.readMounts(); err != nil {
		return m, err
	}
	if m.loops, err = h.readLoops(); err != nil {
		return m, err
	}
	if m.netnsName, err = h.readNetnsNames(); err != nil {
		return m, err
	}
	if m.cgroups, err = h.readCgroups(); err != nil {
		return m, err
	}
	m.links, err = h.readLinks()
	return m, err
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	if path == "" || dir == "" {
		return false
	}
	dir = strings.TrimSuffix(dir, "/")
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// readFileTrim reads a small file; a file that vanished reads as "".
func readFileTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
