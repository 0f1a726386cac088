package auth

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestUnixPeerCredentials reads the credentials of a real connection on a real socket: the
// peer is this process.
func TestUnixPeerCredentials(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	defer server.Close()

	_, info, err := UnixPeerCredentials{}.ServerHandshake(server)
	if err != nil {
		t.Fatal(err)
	}
	id := info.(PeerAuthInfo).Identity
	if id.Kind != "unix" || id.UID != uint32(os.Getuid()) || id.GID != uint32(os.Getgid()) || id.PID != int32(os.Getpid()) {
		t.Errorf("identity %+v, want this process (uid %d gid %d pid %d)", id, os.Getuid(), os.Getgid(), os.Getpid())
	}
}

func TestUnixPeerCredentialsRefuseTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			defer c.Close()
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := (UnixPeerCredentials{}).ServerHandshake(c); err == nil {
		t.Error("a TCP connection must be refused: there are no peer credentials to read")
	}
}
