package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPollInterval is how often a Server or Client reads its files to notice a rotation.
const DefaultPollInterval = 30 * time.Second

// Option is an optional knob of NewServer and NewClient.
type Option func(*options)

type options struct {
	minVersion  uint16
	interval    time.Duration
	expiryHook  func(name string, notAfter time.Time)
	name        string
	log         *slog.Logger
	serverSPIFF string // NewClient only
}

// defaultOptions holds every default in one place.
func defaultOptions() options {
	return options{minVersion: tls.VersionTLS13, interval: DefaultPollInterval, log: slog.Default()}
}

// WithMinVersion sets the lowest TLS version accepted: tls.VersionTLS13 (the default) or
// tls.VersionTLS12. Anything lower is refused by NewServer and NewClient.
func WithMinVersion(v uint16) Option { return func(o *options) { o.minVersion = v } }

// WithPollInterval sets how often the files are read to notice a rotation (default 30 s);
// zero or negative turns polling off (Reload, e.g. on SIGHUP, still works).
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithExpiryHook calls hook(name, notAfter) with the leaf certificate's expiry after every
// successful load, the first one included (see WithName). A Client without a certificate
// never calls it.
func WithExpiryHook(hook func(name string, notAfter time.Time)) Option {
	return func(o *options) { o.expiryHook = hook }
}

// WithName names the configuration in logs and in the expiry hook, e.g. "listeners[0]" or
// "backends.array1.tls".
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithLogger sets where reloads and failed reloads are logged (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// pemFiles are the paths a reloader reads. cert and key are both set or both empty (a client
// that presents no certificate); ca is always set.
type pemFiles struct {
	cert, key, ca string
}

// material is one whole, parsed state of the files; it is never modified once published.
type material struct {
	cert     *tls.Certificate // nil when no certificate is configured
	pool     *x509.CertPool   // the CA bundle: client CAs of a Server, roots of a Client
	notAfter time.Time        // of cert; zero without one
	raw      [3]string        // the files' contents, to notice a change
}

// reloader holds the current material of a set of files and replaces it, whole, when the
// files change (polling) or on Reload. Server and Client embed it. It is safe for concurrent
// use.
type reloader struct {
	files pemFiles
	opts  options
	cur   atomic.Pointer[material]

	reloadMu sync.Mutex // one reload at a time (poller and SIGHUP)
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// start checks the options, loads the files and, unless polling is off, starts watching them.
func (r *reloader) start(files pemFiles, opts []Option) error {
	r.opts = defaultOptions()
	for _, opt := range opts {
		opt(&r.opts)
	}
	if r.opts.minVersion != tls.VersionTLS12 && r.opts.minVersion != tls.VersionTLS13 {
		return fmt.Errorf("tls: minimum version %#x is not TLS 1.2 or 1.3", r.opts.minVersion)
	}
	r.files = files
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	m, err := load(files)
	if err != nil {
		return err
	}
	r.publish(m)
	if r.opts.interval > 0 {
		go r.poll()
	} else {
		close(r.done)
	}
	return nil
}

// Name returns the name given with WithName.
func (r *reloader) Name() string { return r.opts.name }

// NotAfter returns when the certificate now in use stops being valid (zero without one).
func (r *reloader) NotAfter() time.Time { return r.cur.Load().notAfter }

// Reload reads and parses every file; when all are good it publishes them for the next
// handshakes, otherwise it keeps the old material and returns an error naming the file.
// Connections already established are not affected either way.
func (r *reloader) Reload() error {
	_, err := r.reload(true)
	return err
}

// reload loads the files and publishes them; unless force, only when they changed.
func (r *reloader) reload(force bool) (changed bool, err error) {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	m, err := load(r.files)
	if err != nil {
		return false, err
	}
	if !force && m.raw == r.cur.Load().raw {
		return false, nil
	}
	r.publish(m)
	return true, nil
}

func (r *reloader) publish(m *material) {
	r.cur.Store(m)
	if r.opts.expiryHook != nil && m.cert != nil {
		r.opts.expiryHook(r.opts.name, m.notAfter)
	}
}

// poll reloads when the files' contents change. A failed reload is logged once per distinct
// error, not at every tick, and the old material stays in use.
func (r *reloader) poll() {
	defer close(r.done)
	t := time.NewTicker(r.opts.interval)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		changed, err := r.reload(false)
		if err != nil {
			if err.Error() != lastErr {
				r.opts.log.Error("TLS files changed but cannot be loaded; the previous material stays in use",
					"tls", r.opts.name, "error", err)
			}
			lastErr = err.Error()
			continue
		}
		// Good files again, changed or repaired to the material in use (or published first
		// by Reload): the next failure is a new one, logged again.
		lastErr = ""
		if changed {
			r.opts.log.Info("TLS files reloaded", "tls", r.opts.name, "not_after", r.NotAfter())
		}
	}
}

// Close stops watching the files. The configuration keeps using the last material.
func (r *reloader) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	return nil
}

// load reads and parses all of f; its errors name the file at fault.
func load(f pemFiles) (*material, error) {
	var m material
	for i, path := range []string{f.cert, f.key, f.ca} {
		if path == "" {
			continue // no certificate (checked by the caller: cert and key go together)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		m.raw[i] = string(b)
	}
	if f.cert != "" {
		cert, err := tls.X509KeyPair([]byte(m.raw[0]), []byte(m.raw[1]))
		if err != nil {
			return nil, fmt.Errorf("tls: %s and %s: %w", f.cert, f.key, err)
		}
		m.cert = &cert
		m.notAfter = cert.Leaf.NotAfter
	}
	pool, err := parseCABundle([]byte(m.raw[2]))
	if err != nil {
		return nil, fmt.Errorf("tls: %s: %w", f.ca, err)
	}
	m.pool = pool
	return &m, nil
}

// parseCABundle parses every block of a CA bundle strictly. x509.CertPool.AppendCertsFromPEM
// skips blocks it cannot parse and stops at a truncated one, so a bundle cut short or damaged
// mid-rotation (CA1 whole, CA2 not) would be published with CA2 silently missing.
func parseCABundle(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if bytes.Contains(rest, []byte("-----BEGIN")) {
				return nil, fmt.Errorf("certificate %d: cut short or not valid PEM", n+1)
			}
			break // text around the blocks is allowed, as by AppendCertsFromPEM
		}
		if block.Type != "CERTIFICATE" {
			continue // as AppendCertsFromPEM: other blocks (a key) are not certificates
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errNoCA
	}
	return pool, nil
}

var errNoCA = errors.New("no PEM certificate in the CA bundle")
