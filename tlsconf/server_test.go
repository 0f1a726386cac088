package tlsconf

import (
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// tlsListener serves handshakes with cfg on 127.0.0.1 until the test ends.
func tlsListener(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				c.Write([]byte("x")) // lets the client see a refusal of its certificate
			}()
		}
	}()
	return l.Addr().String()
}

// handshake connects with cfg and returns the server's leaf certificate serial, or the error.
func handshake(addr string, cfg *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// In TLS 1.3 the server checks the client's certificate after the client's handshake is
	// done: a read shows whether the server accepted it.
	// A read may return the byte and the server's close_notify (io.EOF) together.
	if n, err := c.Read(make([]byte, 1)); n == 0 {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

type fixture struct {
	ca       *testutil.CA
	files    ServerFiles
	client   testutil.KeyPair
	server   testutil.KeyPair
	dir      string
	expiries []time.Time
	mu       sync.Mutex
	log      *testutil.SyncBuffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ca: testutil.NewCA(t, "test CA"), dir: t.TempDir(), log: &testutil.SyncBuffer{}}
	f.server = f.ca.NewServerLeaf(t)
	f.client = f.ca.NewLeaf(t, testutil.Leaf{URIs: []string{"spiffe://example.org/client"}})
	f.files.Cert, f.files.Key, f.files.ClientCA = testutil.ServerPEMFiles(t, f.dir, f.ca, f.server)
	return f
}

func (f *fixture) start(t *testing.T, opts ...Option) (*Server, string) {
	t.Helper()
	opts = append([]Option{
		WithName("listeners[0]"),
		WithLogger(slog.New(slog.NewTextHandler(f.log, nil))),
		WithExpiryHook(func(name string, notAfter time.Time) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if name == "listeners[0]" {
				f.expiries = append(f.expiries, notAfter)
			}
		}),
	}, opts...)
	s, err := NewServer(f.files, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, tlsListener(t, s.Config())
}

func (f *fixture) clientTLS(t *testing.T, minV, maxV uint16) *tls.Config {
	return testutil.ClientTLS(t, []*testutil.CA{f.ca}, f.client, minV, maxV)
}

func TestServerTLSVersions(t *testing.T) {
	f := newFixture(t)
	_, addr13 := f.start(t, WithPollInterval(0))
	_, addr12 := f.start(t, WithPollInterval(0), WithMinVersion(tls.VersionTLS12))

	if _, err := handshake(addr13, f.clientTLS(t, 0, tls.VersionTLS12)); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("a TLS 1.2 client against the default: %v, want a protocol version refusal", err)
	}
	if _, err := handshake(addr13, f.clientTLS(t, tls.VersionTLS13, 0)); err != nil {
		t.Errorf("a TLS 1.3 client against the default: %v", err)
	}
	if _, err := handshake(addr12, f.clientTLS(t, 0, tls.VersionTLS12)); err != nil {
		t.Errorf("a TLS 1.2 client with WithMinVersion(1.2): %v", err)
	}
	if _, err := handshake(addr12, f.clientTLS(t, 0, tls.VersionTLS11)); err == nil {
		t.Error("a TLS 1.1 client must be refused even with WithMinVersion(1.2)")
	}
	if _, err := NewServer(f.files, WithMinVersion(tls.VersionTLS11)); err == nil {
		t.Error("WithMinVersion(TLS 1.1) must be refused")
	}
}

func TestServerRequiresClientCertificate(t *testing.T) {
	f := newFixture(t)
	_, addr := f.start(t, WithPollInterval(0))
	other := testutil.NewCA(t, "other CA")
	for _, tc := range []struct {
		name string
		kp   testutil.KeyPair
	}{
		{"no certificate", testutil.KeyPair{}},
		{"wrong CA", other.NewLeaf(t, testutil.Leaf{URIs: []string{"spiffe://example.org/client"}})},
		{"expired", f.ca.Expired(t, "spiffe://example.org/client")},
		{"not yet valid", f.ca.NotYetValid(t, "spiffe://example.org/client")},
	} {
		if _, err := handshake(addr, testutil.ClientTLS(t, []*testutil.CA{f.ca}, tc.kp, 0, 0)); err == nil {
			t.Errorf("%s: the handshake succeeded; want it refused", tc.name)
		}
	}
	if _, err := handshake(addr, f.clientTLS(t, 0, 0)); err != nil {
		t.Errorf("a valid client: %v", err)
	}
}

func TestServerReloadOnFileChange(t *testing.T) {
	f := newFixture(t)
	s, addr := f.start(t, WithPollInterval(20*time.Millisecond))
	first, err := handshake(addr, f.clientTLS(t, 0, 0))
	if err != nil || first != f.server.Cert.SerialNumber.String() {
		t.Fatalf("first handshake: serial %s, %v", first, err)
	}

	// Rotation: a new server certificate from a new CA, which also signs the clients now.
	ca2 := testutil.NewCA(t, "rotated CA")
	server2 := ca2.NewServerLeaf(t)
	client2 := ca2.NewLeaf(t, testutil.Leaf{CN: "client2"})
	testutil.WritePEM(t, f.files.Key, server2.KeyPEM)
	testutil.WritePEM(t, f.files.Cert, server2.CertPEM)
	testutil.WritePEM(t, f.files.ClientCA, ca2.PEM)
	want := server2.Cert.SerialNumber.String()
	cfg2 := testutil.ClientTLS(t, []*testutil.CA{ca2}, client2, 0, 0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := handshake(addr, cfg2)
		if err == nil && got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate was not served within 5s: %s, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !s.NotAfter().Equal(server2.Cert.NotAfter) {
		t.Errorf("NotAfter = %v, want %v", s.NotAfter(), server2.Cert.NotAfter)
	}
	f.mu.Lock()
	n := len(f.expiries)
	last := f.expiries[n-1]
	f.mu.Unlock()
	if n < 2 || !last.Equal(server2.Cert.NotAfter) {
		t.Errorf("expiry hook saw %d loads, last %v; want the initial load and the rotation (%v)", n, last, server2.Cert.NotAfter)
	}
	if _, err := handshake(addr, f.clientTLS(t, 0, 0)); err == nil {
		t.Error("a client of the old CA must be refused once the CA bundle is rotated")
	}
	if !strings.Contains(f.log.String(), "TLS files reloaded") {
		t.Errorf("the reload is not logged: %s", f.log.String())
	}
}

func TestServerCorruptFileKeepsOldMaterial(t *testing.T) {
	f := newFixture(t)
	s, addr := f.start(t, WithPollInterval(20*time.Millisecond))
	want := f.server.Cert.SerialNumber.String()

	testutil.WritePEM(t, f.files.Cert, []byte("-----BEGIN CERTIFICATE-----\nbroken\n"))
	err := s.Reload()
	if err == nil || !strings.Contains(err.Error(), f.files.Cert) {
		t.Errorf("Reload of a corrupt certificate: %v, want an error naming %s", err, f.files.Cert)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(f.log.String(), "cannot be loaded") {
		if time.Now().After(deadline) {
			t.Fatalf("the poller did not log the broken file: %s", f.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := handshake(addr, f.clientTLS(t, 0, 0)); err != nil || got != want {
		t.Errorf("after a corrupt file: serial %s, %v; want the old certificate %s", got, err, want)
	}
	// One log line per distinct error, not one per tick.
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(f.log.String(), "cannot be loaded"); n != 1 {
		t.Errorf("the broken file was logged %d times, want once", n)
	}

	// An empty CA bundle and a missing key are refused too, naming the file.
	testutil.WritePEM(t, f.files.Cert, f.server.CertPEM)
	testutil.WritePEM(t, f.files.ClientCA, []byte("not PEM"))
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), f.files.ClientCA) {
		t.Errorf("Reload with a CA bundle without certificates: %v", err)
	}
	testutil.WritePEM(t, f.files.ClientCA, f.ca.PEM)
	os.Remove(f.files.Key)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), f.files.Key) {
		t.Errorf("Reload without the key: %v", err)
	}
	testutil.WritePEM(t, f.files.Key, f.server.KeyPEM)
	if err := s.Reload(); err != nil {
		t.Errorf("Reload of repaired files: %v", err)
	}
}

func TestNewServerErrors(t *testing.T) {
	f := newFixture(t)
	other := f.ca.NewServerLeaf(t)
	mismatched := filepath.Join(f.dir, "other.key")
	testutil.WritePEM(t, mismatched, other.KeyPEM)
	for _, tc := range []struct {
		name  string
		files ServerFiles
		want  string
	}{
		{"missing certificate", ServerFiles{Cert: filepath.Join(f.dir, "nope.crt"), Key: f.files.Key, ClientCA: f.files.ClientCA}, "nope.crt: no such file"},
		{"key of another certificate", ServerFiles{Cert: f.files.Cert, Key: mismatched, ClientCA: f.files.ClientCA}, "private key does not match public key"},
		{"CA bundle is a key", ServerFiles{Cert: f.files.Cert, Key: f.files.Key, ClientCA: f.files.Key}, "no PEM certificate in the CA bundle"},
	} {
		_, err := NewServer(tc.files, WithPollInterval(0))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
