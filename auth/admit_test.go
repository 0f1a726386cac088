package auth

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// countingUnixConn counts what the server reads from a Unix connection.
type countingUnixConn struct {
	*net.UnixConn
	read atomic.Int64
}

func (c *countingUnixConn) Read(p []byte) (int, error) {
	n, err := c.UnixConn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestAdmittingCredentials: on a real Unix socket, a caller the list admits gets its
// connection back; one it refuses is closed inside the handshake, Refused learns who it
// was, and not a byte of what the caller already sent was read.
func TestAdmittingCredentials(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	for _, tc := range []struct {
		name  string
		list  UIDAllowList
		admit bool
	}{
		{"listed", UIDAllowList{UIDs: []uint32{uid}}, true},
		{"empty list", UIDAllowList{}, true},
		{"not listed", UIDAllowList{UIDs: []uint32{uid + 1}, GIDs: []uint32{gid + 1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			client, err := net.Dial("unix", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			if _, err := client.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			raw, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			conn := &countingUnixConn{UnixConn: raw.(*net.UnixConn)}
			defer conn.Close()
			var refused []Identity
			creds := AdmittingCredentials{TransportCredentials: UnixPeerCredentials{}, Admit: tc.list,
				Refused: func(id Identity, _ error) { refused = append(refused, id) }}
			nc, info, err := creds.ServerHandshake(conn)
			if tc.admit {
				if err != nil || nc == nil || IdentityOf(info).UID != uid {
					t.Fatalf("admitted caller: %v, %v, %v", nc, info, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "is not in this listener's allowUIDs/allowGIDs") {
				t.Errorf("refusal: %v", err)
			}
			if len(refused) != 1 || refused[0].UID != uid || refused[0].Kind != "unix" {
				t.Errorf("Refused saw %+v, want this process", refused)
			}
			if n := conn.read.Load(); n != 0 {
				t.Errorf("%d bytes read from a refused caller", n)
			}
			_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
			// Closed with the caller's bytes unread: EOF or a reset.
			if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("the refused caller's read: %v, want the connection closed", err)
			}
		})
	}
}

func TestIdentityOfFailsClosed(t *testing.T) {
	if id := IdentityOf(nil); id.Kind != "anonymous" {
		t.Errorf("no auth info: %+v", id)
	}
	if id := IdentityOf(&PeerAuthInfo{Identity: Identity{Kind: "unix"}}); id.Kind != "anonymous" {
		t.Errorf("a pointer to PeerAuthInfo, which no credentials make, is trusted: %+v", id)
	}
}
