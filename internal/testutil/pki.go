package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority minted in a test. It signs leaves for servers and clients.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded (a bundle of one).
	PEM []byte
}

// Leaf is what NewLeaf mints: identities and validity of a server or client certificate.
type Leaf struct {
	CN       string
	URIs     []string // e.g. spiffe://example.org/ns/x/sa/y
	DNSNames []string
	IPs      []net.IP
	// NotBefore and NotAfter default to an hour ago and a day from now.
	NotBefore, NotAfter time.Time
}

// KeyPair is a minted leaf: certificate and key, PEM-encoded, and the parsed certificate.
type KeyPair struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// nextSerial returns a random serial number, so certificates minted by parallel tests never
// share one.
func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

// NewCA mints a self-signed CA named cn, valid from an hour ago for a day.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// NewLeaf mints a certificate signed by ca for both server and client authentication.
func (ca *CA) NewLeaf(t testing.TB, l Leaf) KeyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if l.NotBefore.IsZero() {
		l.NotBefore = time.Now().Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: l.CN},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, s := range l.URIs {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return KeyPair{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// NewServerLeaf mints a server certificate for localhost and 127.0.0.1.
func (ca *CA) NewServerLeaf(t testing.TB) KeyPair {
	t.Helper()
	return ca.NewLeaf(t, Leaf{CN: "csi-gateway", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
}

// Expired mints a client certificate that stopped being valid an hour ago.
func (ca *CA) Expired(t testing.TB, uri string) KeyPair {
	t.Helper()
	return ca.NewLeaf(t, Leaf{URIs: []string{uri}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
}

// NotYetValid mints a client certificate that becomes valid in an hour.
func (ca *CA) NotYetValid(t testing.TB, uri string) KeyPair {
	t.Helper()
	return ca.NewLeaf(t, Leaf{URIs: []string{uri}, NotBefore: time.Now().Add(time.Hour), NotAfter: time.Now().Add(48 * time.Hour)})
}

// TLSCertificate returns kp as a tls.Certificate for a client or server.
func (kp KeyPair) TLSCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WritePEM writes data to path atomically (temp file and rename in the same directory), as
// cert-manager and kubelet's projected volumes replace files.
func WritePEM(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".pem-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// ServerPEMFiles writes a server leaf of ca and ca's bundle (as the client CA) to dir and
// returns the paths of the certificate, the key and the CA bundle.
func ServerPEMFiles(t testing.TB, dir string, ca *CA, server KeyPair) (cert, key, clientCA string) {
	t.Helper()
	cert, key, clientCA = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	WritePEM(t, cert, server.CertPEM)
	WritePEM(t, key, server.KeyPEM)
	WritePEM(t, clientCA, ca.PEM)
	return cert, key, clientCA
}

// ClientTLS returns a client configuration that trusts roots and presents kp (none when kp
// is the zero KeyPair), limited to TLS versions min..max (0: Go's defaults).
func ClientTLS(t testing.TB, roots []*CA, kp KeyPair, minVersion, maxVersion uint16) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	for _, ca := range roots {
		pool.AddCert(ca.Cert)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: minVersion, MaxVersion: maxVersion}
	if kp.Cert != nil {
		cfg.Certificates = []tls.Certificate{kp.TLSCertificate(t)}
	}
	return cfg
}
