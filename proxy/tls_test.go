package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

const mtlsAllowed = "spiffe://example.org/ns/kube-system/sa/csi-provisioner"

// mtlsHarness is a Server with one TCP mTLS listener on 127.0.0.1 in front of the embedded
// appliance.
type mtlsHarness struct {
	addr  string
	ca    *testutil.CA
	tls   *tlsconf.Server
	files tlsconf.ServerFiles
	log   *testutil.SyncBuffer
}

// startMTLS starts the harness's server on transport tr.
func startMTLS(t *testing.T, tr Transport) *mtlsHarness {
	t.Helper()
	h := &mtlsHarness{ca: testutil.NewCA(t, "gateway CA"), log: &testutil.SyncBuffer{}}
	h.files.Cert, h.files.Key, h.files.ClientCA = testutil.ServerPEMFiles(t, t.TempDir(), h.ca, h.ca.NewServerLeaf(t))
	var err error
	h.tls, err = tlsconf.NewServer(h.files, tlsconf.WithPollInterval(10*time.Millisecond), tlsconf.WithName("listeners[0]"),
		tlsconf.WithLogger(slog.New(slog.NewTextHandler(h.log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.tls.Close() })
	be, err := embedded.OpenBackend("appliance", embedded.Config{DataDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	srv, err := NewServer(Options{
		Routes:    []Route{{Methods: []string{"*"}, Backend: "appliance"}},
		Backends:  map[string]backends.Backend{"appliance": be},
		Log:       slog.New(slog.NewJSONHandler(&testutil.SyncBuffer{}, nil)),
		Transport: tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(Endpoint{Scheme: "tcp", Address: "127.0.0.1:0"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.addr = l.Addr().String()
	policy := ListenerPolicy{
		Creds:   credentials.NewTLS(h.tls.Config()),
		Clients: auth.ClientAllowList{Key: "listeners[0].clients", Rules: []auth.ClientRule{{URI: mtlsAllowed}, {DNS: "node.example.org"}}},
	}
	go srv.Serve(l, policy)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return h
}

func (h *mtlsHarness) dial(t *testing.T, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+h.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (h *mtlsHarness) client(t *testing.T, leaf testutil.Leaf) *grpc.ClientConn {
	t.Helper()
	return h.dial(t, credentials.NewTLS(testutil.ClientTLS(t, []*testutil.CA{h.ca}, h.ca.NewLeaf(t, leaf), 0, 0)))
}

func volumeCount(t *testing.T, conn *grpc.ClientConn) int {
	t.Helper()
	resp, err := csi.NewControllerClient(conn).ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatalf("ListVolumes: %v", err)
	}
	return len(resp.GetEntries())
}

func TestMTLSListener(t *testing.T) { onEachTransport(t, testMTLSListener) }

func testMTLSListener(t *testing.T, tr Transport) {
	h := startMTLS(t, tr)
	allowed := h.client(t, testutil.Leaf{URIs: []string{mtlsAllowed}})
	if _, err := csi.NewControllerClient(allowed).CreateVolume(serverCallCtx(t), serverCreateVolumeRequest("pvc-allowed")); err != nil {
		t.Fatalf("an allowed client's CreateVolume: %v", err)
	}
	if _, err := csi.NewIdentityClient(h.client(t, testutil.Leaf{CN: "node", DNSNames: []string{"node.example.org"}})).Probe(serverCallCtx(t), &csi.ProbeRequest{}); err != nil {
		t.Errorf("a client listed by DNS name: %v", err)
	}
	before := volumeCount(t, allowed)

	other := testutil.NewCA(t, "other CA")
	withCert := func(kp testutil.KeyPair, maxVersion uint16) credentials.TransportCredentials {
		return credentials.NewTLS(testutil.ClientTLS(t, []*testutil.CA{h.ca}, kp, 0, maxVersion))
	}
	for i, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		code  codes.Code
		msg   string
	}{
		{"wrong CA", withCert(other.NewLeaf(t, testutil.Leaf{URIs: []string{mtlsAllowed}}), 0), codes.Unavailable, ""},
		{"expired", withCert(h.ca.Expired(t, mtlsAllowed), 0), codes.Unavailable, ""},
		{"not yet valid", withCert(h.ca.NotYetValid(t, mtlsAllowed), 0), codes.Unavailable, ""},
		{"no client certificate", withCert(testutil.KeyPair{}, 0), codes.Unavailable, ""},
		// Refused in the handshake: the connection closes (see TestRefusedCallerReadsNothing).
		{"unlisted identity", withCert(h.ca.NewLeaf(t, testutil.Leaf{URIs: []string{"spiffe://example.org/intruder"}}), 0), codes.Unavailable, ""},
		{"plaintext", insecure.NewCredentials(), codes.Unavailable, ""},
		{"TLS 1.2 where 1.3 is required", withCert(h.ca.NewLeaf(t, testutil.Leaf{URIs: []string{mtlsAllowed}}), tls.VersionTLS12), codes.Unavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := h.dial(t, tc.creds)
			_, err := csi.NewControllerClient(conn).CreateVolume(serverCallCtx(t), serverCreateVolumeRequest(fmt.Sprintf("pvc-refused-%d", i)))
			st := status.Convert(err)
			if st.Code() != tc.code || tc.msg != "" && st.Message() != tc.msg {
				t.Errorf("CreateVolume: %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
			if n := volumeCount(t, allowed); n != before {
				t.Errorf("volumes: %d, want %d: a refused call changed state", n, before)
			}
		})
	}
}

// TestMTLSReloadUnderLoad rotates the server certificate and the CA bundle while callers make
// calls, each on a new connection so every call is a new handshake: none may fail. A corrupt
// certificate afterwards keeps the last good material serving, and is logged.
func TestMTLSReloadUnderLoad(t *testing.T) { onEachTransport(t, testMTLSReloadUnderLoad) }

func testMTLSReloadUnderLoad(t *testing.T, tr Transport) {
	h := startMTLS(t, tr)
	ca2 := testutil.NewCA(t, "next CA")
	roots := []*testutil.CA{h.ca, ca2}
	clientCreds := credentials.NewTLS(testutil.ClientTLS(t, roots, h.ca.NewLeaf(t, testutil.Leaf{URIs: []string{mtlsAllowed}}), 0, 0))

	var calls, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				conn, err := grpc.NewClient("passthrough:///"+h.addr, grpc.WithTransportCredentials(clientCreds))
				if err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err = csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
					cancel()
					conn.Close()
				}
				calls.Add(1)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	// Trust rotation as cert-manager does it: the bundle holds both CAs while the server
	// certificate moves from the old CA to the new one, and back.
	bundle := append(append([]byte{}, h.ca.PEM...), ca2.PEM...)
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		issuer := []*testutil.CA{h.ca, ca2}[i%2]
		leaf := issuer.NewServerLeaf(t)
		testutil.WritePEM(t, h.files.ClientCA, bundle)
		testutil.WritePEM(t, h.files.Key, leaf.KeyPEM)
		testutil.WritePEM(t, h.files.Cert, leaf.CertPEM)
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || calls.Load() < 20 {
		t.Errorf("%d of %d calls failed during rotation (first: %v)", failed.Load(), calls.Load(), firstErr.Load())
	}
	if !strings.Contains(h.log.String(), "TLS files reloaded") {
		t.Errorf("no reload logged: %s", h.log.String())
	}

	testutil.WritePEM(t, h.files.Cert, []byte("not a certificate"))
	if err := h.tls.Reload(); err == nil || !strings.Contains(err.Error(), h.files.Cert) {
		t.Errorf("Reload of a corrupt certificate: %v, want an error naming it", err)
	}
	for end := time.Now().Add(5 * time.Second); !strings.Contains(h.log.String(), "cannot be loaded"); {
		if time.Now().After(end) {
			t.Fatalf("the corrupt file was not logged: %s", h.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn := h.dial(t, clientCreds)
	if _, err := csi.NewIdentityClient(conn).Probe(serverCallCtx(t), &csi.ProbeRequest{}); err != nil {
		t.Errorf("a new connection after a corrupt certificate: %v; the old material must keep serving", err)
	}
}
