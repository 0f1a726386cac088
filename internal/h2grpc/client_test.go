package h2grpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestClientUnreachable: no server → Unavailable at once, and the Peer option stays unset
// (the gateway fails over on that).
func TestClientUnreachable(t *testing.T) {
	checkGoroutines(t)
	cc := newTestClient(t, filepath.Join(t.TempDir(), "none.sock"), ClientConfig{})
	var p peer.Peer
	start := time.Now()
	err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("x")}, &frame{}, grpc.Peer(&p))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want Unavailable", err)
	}
	if p.Addr != nil {
		t.Errorf("peer set: %v", p.Addr)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
	cc.Close()
	if err := cc.Invoke(context.Background(), mUnary, &frame{}, &frame{}); status.Code(err) != codes.Canceled {
		t.Errorf("after Close: %v, want Canceled", err)
	}
}

// TestClientPeerSet: a call that reached the server fills the Peer option, errors included.
func TestClientPeerSet(t *testing.T) {
	cc := newTestClient(t, grpcGoServer(t, &echoService{}), ClientConfig{})
	for _, method := range []string{mUnary, "/test.Echo/Missing"} {
		var p peer.Peer
		_ = cc.Invoke(ctxTimeout(t, 5*time.Second), method, &frame{b: []byte("x")}, &frame{}, grpc.Peer(&p))
		if p.Addr == nil || p.Addr.Network() != "unix" {
			t.Errorf("%s: peer = %+v", method, p)
		}
	}
}

// TestClientServerKilled: the server goes away mid-call → Unavailable; the next call after
// a new server came up on the same socket reconnects.
func TestClientServerKilled(t *testing.T) {
	checkGoroutines(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	start := func() *grpc.Server {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler((&echoService{}).handle))
		go s.Serve(l)
		return s
	}
	s := start()
	cc := newTestClient(t, sock, ClientConfig{})
	defer cc.Close()
	cs, err := cc.NewStream(ctxTimeout(t, 5*time.Second), &grpc.StreamDesc{ServerStreams: true}, mBlock)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(&frame{b: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Header(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := cs.RecvMsg(&frame{}); status.Code(err) != codes.Unavailable {
		t.Errorf("mid-call: %v, want Unavailable", err)
	}
	s = start()
	defer s.Stop()
	if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("x")}, &frame{}); err != nil {
		t.Errorf("after restart: %v", err)
	}
	s.Stop()
	cc.Close()
}

// TestClientGracefulStopReconnect: after the server's GOAWAY the next call uses a new
// connection to the new server.
func TestClientGracefulStopReconnect(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	serve := func() *grpc.Server {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(echoHandler))
		go s.Serve(l)
		return s
	}
	s := serve()
	cc := newTestClient(t, sock, ClientConfig{})
	if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("1")}, &frame{}); err != nil {
		t.Fatal(err)
	}
	s.GracefulStop()
	s = serve()
	defer s.Stop()
	var got frame
	if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("2")}, &got); err != nil || string(got.b) != "2" {
		t.Fatalf("after GracefulStop: %v %q", err, got.b)
	}
}

// TestClientDriverDrainsCallInFlight: when the server drains (GOAWAY) with a call of this
// client in flight, that call still gets its answer, and the client's next call goes to a
// new connection.
func TestClientDriverDrainsCallInFlight(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	started, release := make(chan struct{}), make(chan struct{})
	serve := func() *grpc.Server {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				return err
			}
			if string(f.b) == "wait" {
				close(started)
				<-release
			}
			return ss.SendMsg(&f)
		}))
		go s.Serve(l)
		return s
	}
	s := serve()
	cc := newTestClient(t, sock, ClientConfig{})
	inflight := make(chan error, 1)
	var got frame
	go func() { inflight <- cc.Invoke(ctxTimeout(t, 10*time.Second), mUnary, &frame{b: []byte("wait")}, &got) }()
	<-started
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	time.Sleep(50 * time.Millisecond) // the GOAWAY reaches the client while the call waits
	close(release)
	if err := <-inflight; err != nil || string(got.b) != "wait" {
		t.Fatalf("call in flight during the drain: %v %q", err, got.b)
	}
	<-stopped
	s = serve()
	defer s.Stop()
	var next frame
	if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("next")}, &next); err != nil || string(next.b) != "next" {
		t.Fatalf("after the drain: %v %q", err, next.b)
	}
}

// TestTLS: h2grpc client → grpc-go server and grpc-go client → h2grpc server over TLS with
// ALPN h2 and a CA minted in the test.
func TestTLS(t *testing.T) {
	ca := testutil.NewCA(t, "test-ca")
	srvCert := ca.NewServerLeaf(t).TLSCertificate(t)
	serverCreds := func() credentials.TransportCredentials {
		return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{srvCert}})
	}
	clientCreds := credentials.NewTLS(testutil.ClientTLS(t, []*testutil.CA{ca}, testutil.KeyPair{}, 0, 0))
	want := payload(300000)
	check := func(t *testing.T, cc grpc.ClientConnInterface) {
		var got frame
		var p peer.Peer
		if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: want}, &got, grpc.Peer(&p)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.b, want) {
			t.Fatal("echo differs")
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); !ok || ti.State.NegotiatedProtocol != "h2" {
			t.Errorf("client AuthInfo %#v", p.AuthInfo)
		}
	}
	t.Run("h2grpc-client", func(t *testing.T) {
		l := unixListener(t)
		s := grpc.NewServer(grpc.Creds(serverCreds()), grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(echoHandler))
		go s.Serve(l)
		defer s.Stop()
		check(t, newTestClient(t, l.Addr().String(), ClientConfig{Creds: clientCreds}))
	})
	t.Run("h2grpc-server", func(t *testing.T) {
		var auth credentials.AuthInfo
		_, addr := startServer(t, ServerConfig{Creds: serverCreds(), Handler: func(srv any, ss grpc.ServerStream) error {
			p, _ := peer.FromContext(ss.Context())
			auth = p.AuthInfo
			return echoHandler(srv, ss)
		}})
		cc, err := grpc.NewClient("unix://"+addr, grpc.WithTransportCredentials(clientCreds),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})), grpc.WithAuthority("localhost"))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		check(t, cc)
		if ti, ok := auth.(credentials.TLSInfo); !ok || ti.State.NegotiatedProtocol != "h2" {
			t.Errorf("server AuthInfo %#v", auth)
		}
	})
}

// failingConn refuses every write once fail is set, as a socket whose peer went away does.
type failingConn struct {
	net.Conn
	fail *atomic.Bool
}

func (c failingConn) Write(p []byte) (int, error) {
	if c.fail.Load() {
		return 0, syscall.EPIPE
	}
	return c.Conn.Write(p)
}

// TestClientWriteFailedNotDelivered: a call whose request the connection never accepted is
// Unavailable with the Peer option unset — the server cannot have seen it, so the gateway may
// send it to another target — while a call that reached the server before sets it.
func TestClientWriteFailedNotDelivered(t *testing.T) {
	addr := grpcGoServer(t, &echoService{})
	var fail atomic.Bool
	cc := newTestClient(t, addr, ClientConfig{Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", addr)
		return failingConn{Conn: c, fail: &fail}, err
	}})
	var p peer.Peer
	if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("x")}, &frame{}, grpc.Peer(&p)); err != nil || p.Addr == nil {
		t.Fatalf("first call: %v, peer %v", err, p.Addr)
	}
	fail.Store(true)
	p = peer.Peer{}
	err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("x")}, &frame{}, grpc.Peer(&p))
	if status.Code(err) != codes.Unavailable || p.Addr != nil {
		t.Fatalf("write refused: %v, peer %v; want Unavailable and no peer", err, p.Addr)
	}
}

// TestUnaryCallsSendNoReset: a unary call that ends normally sends no RST_STREAM, however soon
// its answer comes back. The client used to note its END_STREAM as sent only once its write
// returned, so trailers read in between made it reset a finished stream; a server's reset
// budget (the rapid-reset guard) then took a busy client for an attacker.
func TestUnaryCallsSendNoReset(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler, MaxStreamResetsPerSecond: 1})
	cc := newTestClient(t, addr, ClientConfig{})
	for i := range 3000 {
		if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("x")}, &frame{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}
