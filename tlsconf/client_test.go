package tlsconf

import (
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// clientFiles writes the CA bundle of ca and the client key pair kp (none when zero) to a
// new directory and returns the files, with serverName "localhost".
func clientFiles(t *testing.T, ca *testutil.CA, kp testutil.KeyPair) ClientFiles {
	t.Helper()
	dir := t.TempDir()
	f := ClientFiles{CA: filepath.Join(dir, "ca.crt"), ServerName: "localhost"}
	testutil.WritePEM(t, f.CA, ca.PEM)
	if kp.Cert != nil {
		f.Cert, f.Key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		testutil.WritePEM(t, f.Cert, kp.CertPEM)
		testutil.WritePEM(t, f.Key, kp.KeyPEM)
	}
	return f
}

func newClient(t *testing.T, files ClientFiles, opts ...Option) *Client {
	t.Helper()
	c, err := NewClient(files, append([]Option{WithPollInterval(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClientPinnedCAAndClientCertificate(t *testing.T) {
	f := newFixture(t)
	_, addr := f.start(t, WithPollInterval(0))

	c := newClient(t, clientFiles(t, f.ca, f.client))
	serial, err := handshake(addr, c.Config())
	if err != nil {
		t.Fatalf("pinned CA and a client certificate: %v", err)
	}
	if serial != f.server.Cert.SerialNumber.String() {
		t.Errorf("server serial %s, want %s", serial, f.server.Cert.SerialNumber)
	}
	if got := c.NotAfter(); !got.Equal(f.client.Cert.NotAfter) {
		t.Errorf("NotAfter %v, want the client certificate's %v", got, f.client.Cert.NotAfter)
	}

	// No client certificate: the listener (which requires one) refuses the handshake.
	if _, err := handshake(addr, newClient(t, clientFiles(t, f.ca, testutil.KeyPair{})).Config()); err == nil {
		t.Error("a client without a certificate was accepted by a listener that requires one")
	}
}

func TestClientRefusesWrongCA(t *testing.T) {
	f := newFixture(t)
	_, addr := f.start(t, WithPollInterval(0))
	other := testutil.NewCA(t, "other CA")

	_, err := handshake(addr, newClient(t, clientFiles(t, other, f.client)).Config())
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a server signed by another CA: %v, want a certificate verification error (unknown authority)", err)
	}
}

func TestClientChecksServerName(t *testing.T) {
	f := newFixture(t)
	_, addr := f.start(t, WithPollInterval(0))

	files := clientFiles(t, f.ca, f.client)
	files.ServerName = "array1.example"
	if _, err := handshake(addr, newClient(t, files).Config()); err == nil || !strings.Contains(err.Error(), "array1.example") {
		t.Errorf("a certificate that does not name the server: %v, want a refusal naming array1.example", err)
	}
	files.ServerName = "127.0.0.1" // an IP SAN of the server's certificate
	if _, err := handshake(addr, newClient(t, files).Config()); err != nil {
		t.Errorf("serverName 127.0.0.1: %v", err)
	}
	files.ServerName = "" // dialled by IP with nothing to check it against: refused
	if _, err := handshake(addr, newClient(t, files).Config()); err == nil || !strings.Contains(err.Error(), "set serverName") {
		t.Errorf("an IP address without serverName: %v, want a refusal saying to set serverName", err)
	}
}

func TestClientServerSPIFFEID(t *testing.T) {
	f := newFixture(t)
	f.server = f.ca.NewLeaf(t, testutil.Leaf{URIs: []string{"spiffe://example.org/central"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	f.files.Cert, f.files.Key, f.files.ClientCA = testutil.ServerPEMFiles(t, f.dir, f.ca, f.server)
	_, addr := f.start(t, WithPollInterval(0))

	files := clientFiles(t, f.ca, f.client)
	files.ServerName = ""
	if _, err := handshake(addr, newClient(t, files, WithServerSPIFFEID("spiffe://example.org/central")).Config()); err != nil {
		t.Errorf("the expected SPIFFE ID: %v", err)
	}
	_, err := handshake(addr, newClient(t, files, WithServerSPIFFEID("spiffe://example.org/other")).Config())
	if err == nil || !strings.Contains(err.Error(), "spiffe://example.org/other") {
		t.Errorf("another SPIFFE ID: %v, want a refusal naming the expected ID", err)
	}
}

func TestClientReload(t *testing.T) {
	f := newFixture(t)
	_, addr := f.start(t, WithPollInterval(0))
	other := testutil.NewCA(t, "other CA")

	// Start with the wrong CA and a client certificate the listener does not trust.
	files := clientFiles(t, other, other.NewLeaf(t, testutil.Leaf{CN: "stranger"}))
	c := newClient(t, files)
	cfg := c.Config() // one configuration across the reload, as a connection pool keeps it
	if _, err := handshake(addr, cfg); err == nil {
		t.Fatal("the wrong CA was accepted")
	}

	testutil.WritePEM(t, files.CA, f.ca.PEM)
	testutil.WritePEM(t, files.Cert, f.client.CertPEM)
	testutil.WritePEM(t, files.Key, f.client.KeyPEM)
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(addr, cfg); err != nil {
		t.Fatalf("after reloading the right CA and certificate: %v", err)
	}

	// A broken CA file keeps the good material.
	testutil.WritePEM(t, files.CA, []byte("not PEM"))
	if err := c.Reload(); err == nil || !strings.Contains(err.Error(), files.CA) {
		t.Errorf("reloading a broken CA: %v, want an error naming %s", err, files.CA)
	}
	if _, err := handshake(addr, cfg); err != nil {
		t.Errorf("after a failed reload: %v, want the old material to keep working", err)
	}
}

func TestNewClientErrors(t *testing.T) {
	ca := testutil.NewCA(t, "test CA")
	good := clientFiles(t, ca, ca.NewLeaf(t, testutil.Leaf{CN: "gw"}))
	for _, tc := range []struct {
		name  string
		files ClientFiles
		opts  []Option
		want  string
	}{
		{"no CA", ClientFiles{}, nil, "ca: a PEM file is required"},
		{"cert without key", ClientFiles{CA: good.CA, Cert: good.Cert}, nil, "give both"},
		{"missing CA file", ClientFiles{CA: good.CA + ".missing"}, nil, good.CA + ".missing"},
		{"CA not PEM", ClientFiles{CA: good.Key}, nil, "no PEM certificate"},
		{"key mismatch", ClientFiles{CA: good.CA, Cert: good.Cert, Key: clientFiles(t, ca, ca.NewLeaf(t, testutil.Leaf{})).Key}, nil, good.Cert},
		{"TLS 1.1", good, []Option{WithMinVersion(tls.VersionTLS11)}, "not TLS 1.2 or 1.3"},
		{"bad SPIFFE ID", good, []Option{WithServerSPIFFEID("https://example.org/x")}, "not spiffe://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewClient(tc.files, append([]Option{WithPollInterval(0)}, tc.opts...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewClient: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
