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
	return readDir(h, "sys/class/net", func(name string) (link, bool) {
		dir := h.path("sys/class/net/" + name)
		l := link{name: name, ifindex: readFileTrim(filepath.Join(dir, "ifindex")), kind: "interface"}
		if _, err := os.Stat(filepath.Join(dir, "bridge")); err == nil {
			l.kind = "bridge"
		}
		return l, true
	})
}
