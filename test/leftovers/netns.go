package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	entries, err := os.ReadDir(h.path("run/netns"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []netnsName
	for _, e := range entries {
		n := netnsName{name: e.Name()}
		var st syscall.Stat_t
		if syscall.Stat(h.path("run/netns/"+e.Name()), &st) == nil && st.Ino != 0 {
			n.netns = fmt.Sprintf("net:[%d]", st.Ino)
		}
		out = append(out, n)
	}
	return out, nil
}
