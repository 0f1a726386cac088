package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/tlsconf"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/csi-gateway/csi-gateway/auth"
)

func TestIdentify(t *testing.T) {
	unixID := auth.Identity{Kind: "unix", UID: 1000, GID: 100, PID: 4242}
	anonymous := auth.Identity{Kind: "anonymous"}
	addr := &net.UnixAddr{Name: "@", Net: "unix"}
	tests := []struct {
		name string
		ctx  context.Context
		want auth.Identity
	}{
		{"peer credentials", peer.NewContext(context.Background(),
			&peer.Peer{Addr: addr, AuthInfo: auth.PeerAuthInfo{Identity: unixID}}), unixID},
		{"root", peer.NewContext(context.Background(),
			&peer.Peer{Addr: addr, AuthInfo: auth.PeerAuthInfo{Identity: auth.Identity{Kind: "unix"}}}), auth.Identity{Kind: "unix"}},
		{"no peer", context.Background(), anonymous},
		{"peer without auth info", peer.NewContext(context.Background(), &peer.Peer{Addr: addr}), anonymous},
		{"TLS auth info", peer.NewContext(context.Background(),
			&peer.Peer{Addr: addr, AuthInfo: credentials.TLSInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}}), anonymous},
		{"pointer to peer auth info is not trusted", peer.NewContext(context.Background(),
			&peer.Peer{Addr: addr, AuthInfo: &auth.PeerAuthInfo{Identity: unixID}}), anonymous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := identify(tt.ctx); got != tt.want {
				t.Errorf("identify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// countingUnixConn counts the bytes the server reads from a Unix connection.
type countingUnixConn struct {
	*net.UnixConn
	read *atomic.Int64
}

func (c *countingUnixConn) Read(p []byte) (int, error) {
	n, err := c.UnixConn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// countingUnixListener hands out countingUnixConns.
type countingUnixListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingUnixListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingUnixConn{UnixConn: c.(*net.UnixConn), read: &l.read}, nil
}

// countingConn counts the bytes read from a connection once its TLS handshake is over.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// countingCreds are TLS credentials whose connections count what is read after the handshake.
type countingCreds struct {
	credentials.TransportCredentials
	read *atomic.Int64
}

func (c countingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		return nil, nil, err
	}
	return &countingConn{Conn: nc, read: c.read}, info, nil
}

// TestRefusedCallerReadsNothing: on both transports, a caller the listener refuses (a Unix
// caller whose uid is not in allowUIDs; a client certificate of the right CA whose identity
// is not in clients) gets its connection closed with not one byte of HTTP/2 read from it
// (after the TLS handshake, for mTLS) and no HTTP/2 connection begun (the stats handlers'
// ConnBegin never fires). The same listeners then serve an admitted caller, which shows the
// counters count.
func TestRefusedCallerReadsNothing(t *testing.T) {
	uid := uint32(os.Getuid())
	onEachTransport(t, func(t *testing.T, transport Transport) {
		cs := newCallStats()
		opts := serverFakeOptions(&serverFake{})
		opts.Transport, opts.StatsHandlers = transport, []stats.Handler{cs}
		opts.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
		srv, err := NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
		serve := func(l net.Listener, p ListenerPolicy) { go srv.Serve(l, p) }
		probe := func(target string, creds credentials.TransportCredentials) error {
			conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = csi.NewIdentityClient(conn).Probe(serverCallCtx(t), &csi.ProbeRequest{})
			return err
		}
		check := func(what string, err error, read int64, wantServed bool) {
			t.Helper()
			begins := cs.connBegins.Load()
			if wantServed {
				if err != nil || begins == 0 || read == 0 {
					t.Errorf("%s: %v, %d connections begun, %d bytes read; want served", what, err, begins, read)
				}
				return
			}
			if status.Code(err) != codes.Unavailable || begins != 0 || read != 0 {
				t.Errorf("%s: %v, %d HTTP/2 connections begun, %d bytes read; want UNAVAILABLE, 0 and 0", what, err, begins, read)
			}
		}

		t.Run("uid not in allowUIDs", func(t *testing.T) {
			cs.connBegins.Store(0)
			dir := t.TempDir()
			var ls [2]*countingUnixListener
			for i, p := range []ListenerPolicy{{AllowUIDs: []uint32{uid + 1}}, {}} {
				l, err := Listen(Endpoint{Scheme: "unix", Address: filepath.Join(dir, fmt.Sprintf("%d.sock", i))}, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				ls[i] = &countingUnixListener{Listener: l}
				serve(ls[i], p)
			}
			err := probe("unix://"+ls[0].Addr().String(), insecure.NewCredentials())
			check("a refused uid", err, ls[0].read.Load(), false)
			err = probe("unix://"+ls[1].Addr().String(), insecure.NewCredentials())
			check("an admitted uid", err, ls[1].read.Load(), true)
		})

		t.Run("certificate not in clients", func(t *testing.T) {
			cs.connBegins.Store(0)
			ca := testutil.NewCA(t, "gateway CA")
			var files tlsconf.ServerFiles
			files.Cert, files.Key, files.ClientCA = testutil.ServerPEMFiles(t, t.TempDir(), ca, ca.NewServerLeaf(t))
			ts, err := tlsconf.NewServer(files)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ts.Close() })
			l, err := Listen(Endpoint{Scheme: "tcp", Address: "127.0.0.1:0"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			var read atomic.Int64
			serve(l, ListenerPolicy{Creds: countingCreds{TransportCredentials: credentials.NewTLS(ts.Config()), read: &read},
				Clients: auth.ClientAllowList{Key: "listeners[0].clients", Rules: []auth.ClientRule{{URI: mtlsAllowed}}}})
			withURI := func(uri string) credentials.TransportCredentials {
				return credentials.NewTLS(testutil.ClientTLS(t, []*testutil.CA{ca}, ca.NewLeaf(t, testutil.Leaf{URIs: []string{uri}}), 0, 0))
			}
			err = probe("passthrough:///"+l.Addr().String(), withURI("spiffe://example.org/intruder"))
			check("an unlisted certificate", err, read.Load(), false)
			err = probe("passthrough:///"+l.Addr().String(), withURI(mtlsAllowed))
			check("a listed certificate", err, read.Load(), true)
		})
	})
}
