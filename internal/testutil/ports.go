package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
)

// Ports below the kernel's ephemeral range: neither an outgoing connection's source port nor
// another test's listen on :0 can take one between FreeAddr and the server's own bind, nor
// while a killed server is down before its restart on the same address.
const (
	lowestPort    = 10000
	ephemeralFrom = 32768 // Linux's default; /proc/sys/net/ipv4/ip_local_port_range wins
)

// FreeAddr returns a 127.0.0.1 address nothing listens on at the moment, for a server that
// must be told its address before it starts (etcd members, the gateway's admin listener…).
// Its port is drawn at random below the ephemeral range, so only another test drawing the
// same port can take it in between.
func FreeAddr(t testing.TB) string {
	t.Helper()
	top := ephemeralFrom
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var lo, hi int
		if n, _ := fmt.Sscan(string(b), &lo, &hi); n == 2 && lo > lowestPort+1000 {
			top = lo
		}
	}
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", lowestPort+rand.IntN(top-lowestPort))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatalf("no free port on 127.0.0.1 in [%d, %d) after 100 draws", lowestPort, top)
	return ""
}

// FreePort is FreeAddr's port.
func FreePort(t testing.TB) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(FreeAddr(t))
	var n int
	fmt.Sscan(p, &n)
	return n
}
