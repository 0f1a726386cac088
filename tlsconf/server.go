package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPollInterval is how often a Server reads its files to notice a rotation.
const DefaultPollInterval = 30 * time.Second

// ServerFiles are the PEM files of a TLS listener: its certificate chain, its private key and
// the CA bundle that client certificates must chain to.
type ServerFiles struct {
	Cert, Key, ClientCA string
}

// Option is an optional knob of NewServer.
type Option func(*options)

type options struct {
	minVersion uint16
	interval   time.Duration
	expiryHook func(name string, notAfter time.Time)
	name       string
	log        *slog.Logger
}

// WithMinVersion sets the lowest TLS version accepted: tls.VersionTLS13 (the default) or
// tls.VersionTLS12. Anything lower is refused by NewServer.
func WithMinVersion(v uint16) Option { return func(o *options) { o.minVersion = v } }

// WithPollInterval sets how often the files are read to notice a rotation (default 30 s);
// zero or negative turns polling off (Reload, e.g. on SIGHUP, still works).
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithExpiryHook calls hook(name, notAfter) with the leaf certificate's expiry after every
// successful load, the first one included (see WithName).
func WithExpiryHook(hook func(name string, notAfter time.Time)) Option {
	return func(o *options) { o.expiryHook = hook }
}

// WithName names the configuration in logs and in the expiry hook, e.g. "listeners[0]".
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithLogger sets where reloads and failed reloads are logged (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// material is one whole, parsed state of the files; it is never modified once published.
type material struct {
	cert     tls.Certificate
	clientCA *x509.CertPool
	notAfter time.Time
	raw      [3]string // the files' contents, to notice a change
}

// Server is the TLS configuration of one listener, reloaded from its files. The files are
// parsed whole and the result published atomically, so a handshake sees either the old
// material or the new, never a mix; a reload that fails keeps the old material. It is safe
// for concurrent use. Close stops the polling goroutine.
type Server struct {
	files ServerFiles
	opts  options
	cur   atomic.Pointer[material]

	reloadMu sync.Mutex // one reload at a time (poller and SIGHUP)
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// NewServer loads files and, unless polling is off, starts watching them. It fails when any
// file cannot be read or parsed, the key does not match the certificate, the CA bundle holds
// no certificate, or the minimum version is below TLS 1.2.
func NewServer(files ServerFiles, opts ...Option) (*Server, error) {
	o := options{minVersion: tls.VersionTLS13, interval: DefaultPollInterval, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.minVersion != tls.VersionTLS12 && o.minVersion != tls.VersionTLS13 {
		return nil, fmt.Errorf("tls: minimum version %#x is not TLS 1.2 or 1.3", o.minVersion)
	}
	s := &Server{files: files, opts: o, stop: make(chan struct{}), done: make(chan struct{})}
	m, err := load(files)
	if err != nil {
		return nil, err
	}
	s.publish(m)
	if o.interval > 0 {
		go s.poll()
	} else {
		close(s.done)
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
				ClientCAs:    m.clientCA,
				Certificates: []tls.Certificate{m.cert},
				NextProtos:   []string{"h2"},
			}, nil
		},
	}
}

// Name returns the name given with WithName.
func (s *Server) Name() string { return s.opts.name }

// NotAfter returns when the certificate now served stops being valid.
func (s *Server) NotAfter() time.Time { return s.cur.Load().notAfter }

// Reload reads and parses every file; when all are good it publishes them for the next
// handshakes, otherwise it keeps the old material and returns an error naming the file.
// Connections already established are not affected either way.
func (s *Server) Reload() error {
	_, err := s.reload(true)
	return err
}

// reload loads the files and publishes them; unless force, only when they changed.
func (s *Server) reload(force bool) (changed bool, err error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	m, err := load(s.files)
	if err != nil {
		return false, err
	}
	if !force && m.raw == s.cur.Load().raw {
		return false, nil
	}
	s.publish(m)
	return true, nil
}

func (s *Server) publish(m *material) {
	s.cur.Store(m)
	if s.opts.expiryHook != nil {
		s.opts.expiryHook(s.opts.name, m.notAfter)
	}
}

// poll reloads when the files' contents change. A failed reload is logged once per distinct
// error, not at every tick, and the old material keeps serving.
func (s *Server) poll() {
	defer close(s.done)
	t := time.NewTicker(s.opts.interval)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		changed, err := s.reload(false)
		switch {
		case err != nil:
			if err.Error() != lastErr {
				s.opts.log.Error("TLS files changed but cannot be loaded; the previous certificate keeps serving",
					"listener", s.opts.name, "error", err)
			}
			lastErr = err.Error()
		case changed:
			lastErr = ""
			s.opts.log.Info("TLS files reloaded", "listener", s.opts.name, "not_after", s.NotAfter())
		}
	}
}

// Close stops watching the files. The configuration keeps serving the last material.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

// load reads and parses all of files; its errors name the file at fault.
func load(f ServerFiles) (*material, error) {
	var m material
	for i, path := range []string{f.Cert, f.Key, f.ClientCA} {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		m.raw[i] = string(b)
	}
	cert, err := tls.X509KeyPair([]byte(m.raw[0]), []byte(m.raw[1]))
	if err != nil {
		return nil, fmt.Errorf("tls: %s and %s: %w", f.Cert, f.Key, err)
	}
	m.cert = cert
	m.notAfter = cert.Leaf.NotAfter
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(m.raw[2])) {
		return nil, fmt.Errorf("tls: %s: %w", f.ClientCA, errNoCA)
	}
	m.clientCA = pool
	return &m, nil
}

var errNoCA = errors.New("no PEM certificate in the CA bundle")
