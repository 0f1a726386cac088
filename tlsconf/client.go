package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
)

// ClientFiles are the PEM files the gateway dials a backend with: the CA bundle the
// backend's certificate must chain to (pinned: the system roots are not used), and the
// gateway's own certificate chain and key, presented when the backend asks (both or
// neither). ServerName is the name the backend's certificate must carry; empty means the
// host being dialled.
type ClientFiles struct {
	CA, Cert, Key string
	ServerName    string
}

// WithServerSPIFFEID makes a Client accept only a server whose certificate carries the URI
// SAN id (spiffe://trust-domain/path); the certificate must still chain to the CA bundle, but
// its DNS names are then not checked. NewServer ignores it.
func WithServerSPIFFEID(id string) Option { return func(o *options) { o.serverSPIFF = id } }

// Client is the TLS configuration of connections to one backend, reloaded from its files
// like a Server's: every handshake verifies the server against the CA bundle current at that
// moment and presents the current certificate, so a rotation needs no new connection
// pool. It is safe for concurrent use. Close stops the polling goroutine.
type Client struct {
	reloader   // Name, NotAfter, Reload, Close
	serverName string
}

// NewClient loads files and, unless polling is off, starts watching them. It fails when the
// CA bundle is missing or holds no certificate, only one of Cert and Key is given, a file
// cannot be read or parsed, the SPIFFE ID is not a spiffe:// URI, or the minimum version is
// below TLS 1.2.
func NewClient(files ClientFiles, opts ...Option) (*Client, error) {
	switch {
	case files.CA == "":
		return nil, errors.New("tls: ca: a PEM file is required (the CA bundle that signed the server's certificate)")
	case (files.Cert == "") != (files.Key == ""):
		return nil, errors.New("tls: cert and key: give both (the client certificate and its key) or neither")
	}
	c := &Client{serverName: files.ServerName}
	if err := c.start(pemFiles{cert: files.Cert, key: files.Key, ca: files.CA}, opts); err != nil {
		return nil, err
	}
	if id := c.opts.serverSPIFF; id != "" {
		if u, err := url.Parse(id); err != nil || u.Scheme != "spiffe" || u.Host == "" {
			c.Close()
			return nil, fmt.Errorf("tls: server SPIFFE ID %q is not spiffe://trust-domain/path", id)
		}
	}
	return c, nil
}

// Config returns a configuration for dialling the backend. Go's own verification is turned
// off (it could only use a CA pool fixed when the configuration is cloned) and done instead
// in VerifyConnection, against the current pool: the chain must lead to it, and the
// certificate must name the server (ServerName, or the host dialled when that is a DNS
// name) or, with WithServerSPIFFEID, carry that ID. A server dialled by IP address with no
// ServerName and no SPIFFE ID is refused, never accepted unchecked.
func (c *Client) Config() *tls.Config {
	return &tls.Config{
		MinVersion: c.opts.minVersion,
		ServerName: c.serverName,
		// Verification is not skipped: VerifyConnection does it, with the current pool.
		InsecureSkipVerify: true, //nolint:gosec
		VerifyConnection:   c.verify,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if m := c.cur.Load(); m.cert != nil {
				return m.cert, nil
			}
			return &tls.Certificate{}, nil // none: the server decides whether that is enough
		},
	}
}

// verify checks the server's chain against the current CA pool and its identity. Failures
// are *tls.CertificateVerificationError, as with Go's own verification.
func (c *Client) verify(cs tls.ConnectionState) error {
	certs := cs.PeerCertificates
	if len(certs) == 0 {
		return errors.New("tls: the server presented no certificate")
	}
	opts := x509.VerifyOptions{Roots: c.cur.Load().pool, Intermediates: x509.NewCertPool()}
	for _, ic := range certs[1:] {
		opts.Intermediates.AddCert(ic)
	}
	spiffeID := c.opts.serverSPIFF
	if spiffeID == "" {
		// cs.ServerName is the SNI sent, empty for an IP address.
		opts.DNSName = cs.ServerName
		if opts.DNSName == "" {
			opts.DNSName = c.serverName
		}
		if opts.DNSName == "" {
			return errors.New("tls: the server is dialled by IP address and no server name is configured; set serverName to a name (or the IP) in its certificate")
		}
	}
	if _, err := certs[0].Verify(opts); err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: certs, Err: err}
	}
	if spiffeID != "" {
		for _, u := range certs[0].URIs {
			if u.String() == spiffeID {
				return nil
			}
		}
		return &tls.CertificateVerificationError{UnverifiedCertificates: certs,
			Err: fmt.Errorf("the server's certificate does not carry the SPIFFE ID %s", spiffeID)}
	}
	return nil
}
