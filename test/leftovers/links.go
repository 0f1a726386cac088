package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// link is a network interface of the root namespace: a bridge, a veth end, a dummy…
type link struct {
	name, ifindex, kind string
}

func (l link) key() string { return l.name + " " + l.ifindex }

func (l link) String() string { return fmt.Sprintf("link %s (%s)", l.name, l.kind) }

func (h host) readLinks() ([]link, error) {
	entries, err := os.ReadDir(h.path("sys/class/net"))
	if err != nil {
		return nil, err
	}
	var out []link
	for _, e := range entries {
		dir := h.path("sys/class/net/" + e.Name())
		l := link{name: e.Name(), ifindex: readFileTrim(filepath.Join(dir, "ifindex")), kind: "interface"}
		if _, err := os.Stat(filepath.Join(dir, "bridge")); err == nil {
			l.kind = "bridge"
		}
		out = append(out, l)
	}
	return out, nil
}
