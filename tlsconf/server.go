package tlsconf

import (
	"crypto/tls"
	"fmt"
)

// ServerFiles are the PEM files of a TLS listener: its certificate chain, its private key and
// the CA bundle that client certificates must chain to.
type ServerFiles struct {
	Cert, Key, ClientCA string
}

// Server is the TLS configuration of one listener, reloaded from its files. The files are
// parsed whole and the result published atomically, so a handshake sees either the old
// material or the new, never a mix; a reload that fails keeps the old material. It is safe
// for concurrent use. Close stops the polling goroutine.
type Server struct {
	reloader // Name, NotAfter, Reload, Close
}

// NewServer loads files and, unless polling is off, starts watching them. It fails when any
// file cannot be read or parsed, the key does not match the certificate, the CA bundle holds
// no certificate, or the minimum version is below TLS 1.2.
func NewServer(files ServerFiles, opts ...Option) (*Server, error) {
	for _, f := range []struct{ key, path string }{{"cert", files.Cert}, {"key", files.Key}, {"clientCA", files.ClientCA}} {
		if f.path == "" {
			return nil, fmt.Errorf("tls: %s: a PEM file is required", f.key)
		}
	}
	s := &Server{}
	if err := s.start(pemFiles{cert: files.Cert, key: files.Key, ca: files.ClientCA}, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// Config returns a configuration for a TLS server: every handshake takes the certificate and
// the client CA pool current at that moment, requires a client certificate that chains to the
// pool, and refuses versions below the minimum.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: s.opts.minVersion,
		ClientAuth: tls.RequireAndVerifyClientCert,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			return &tls.Config{
				MinVersion:   s.opts.minVersion,
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    m.pool,
				Certificates: []tls.Certificate{*m.cert},
				NextProtos:   []string{"h2"},
			}, nil
		},
	}
}
