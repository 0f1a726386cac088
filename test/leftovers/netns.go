package main

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// netnsName is an entry of /run/netns (ip netns add): a bind mount of a namespace.
type netnsName struct {
	name  string
	netns string // net:[INODE], as /proc/PID/ns/net reads; "" when it cannot be told
}

func (n netnsName) String() string {
	return fmt.Sprintf("netns %s (/run/netns/%s)", n.name, n.name)
}

func (h host) readNetnsNames() ([]netnsName, error) {
	out, err := readDir(h, "run/netns", func(name string) (netnsName, bool) {
		n := netnsName{name: name}
		var st syscall.Stat_t
		if syscall.Stat(h.path("run/netns/"+name), &st) == nil && st.Ino != 0 {
			n.netns = fmt.Sprintf("net:[%d]", st.Ino)
		}
		return n, true
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}
