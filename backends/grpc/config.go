package grpcbackend

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/csi-gateway/csi-gateway/backends"
)

// Config is one grpc backend's configuration (backends.NAME in the gateway's config file).
// Exactly one of Target and Targets is set.
type Config struct {
	// Target (target) is the driver's address: unix:///abs/path.sock (a Unix socket; the path
	// must be absolute), or dns:///host:port (TCP), which is accepted only with TLS credentials
	// given by WithTransportCredentials. It is the shorthand for one target.
	Target string
	// Targets (targets) are addresses of the same driver, in failover order, each written like
	// Target: a call goes to the target that worked last and moves on to the next only when
	// it cannot reach its driver (see Backend). Every target gets the same credentials.
	Targets []string
}

// targetList returns the configured targets, each with the key errors name it by. Errors name
// the key at fault.
func (c Config) targetList(name string) ([]string, []string, error) {
	switch {
	case c.Target != "" && len(c.Targets) > 0:
		return nil, nil, fmt.Errorf("backends.%s: target and targets are both set; use target for one driver address or targets for several, not both", name)
	case len(c.Targets) > 0:
		keys := make([]string, len(c.Targets))
		for i := range c.Targets {
			keys[i] = fmt.Sprintf("backends.%s.targets[%d]", name, i)
		}
		return c.Targets, keys, nil
	}
	return []string{c.Target}, []string{"backends." + name + ".target"}, nil
}

// Option is an optional setting of New.
type Option func(*options)

type options struct {
	creds        credentials.TransportCredentials
	dialOptions  []grpc.DialOption
	readyTimeout time.Duration
	tracing      backends.ClientTracing // see WithTracing
	log          *slog.Logger           // failover notices (see WithLogger)
	frames       bool                   // calls over internal/h2grpc (see WithFrames)
	userAgent    string                 // of the backend's own calls (see WithUserAgent)
	agents       agentOptions           // the callers' user-agents (agents.go)

	breaker breakerOptions // see WithCircuitBreaker (breaker.go)
}

// defaultOptions holds every default in one place.
func defaultOptions() options {
	return options{readyTimeout: 2 * time.Second, log: slog.New(slog.DiscardHandler), agents: defaultAgentOptions()}
}

// WithTracing makes one client span per call to the driver (a child of the span in the
// call's context), with otelgrpc's stats handler and spans from t.Provider, and sends the
// span's W3C trace context to the driver in the call's metadata (traceparent, tracestate,
// baggage) with t's propagator, in place of any the caller sent. Each span carries
// csi.backend and csi.attempt.
//
// Calls made outside any trace (Ready's probes) get no span. A span's status never carries the
// driver's error message (it may echo a secret of the request; the gateway's server span has
// the scrubbed one): a failed call's span says Error and the code's name. Without this option
// (or with a nil t.Provider) the backend makes no spans, and the caller's own trace metadata
// is forwarded unchanged.
func WithTracing(t backends.ClientTracing) Option {
	return func(o *options) { o.tracing = t }
}

// WithTransportCredentials sets the credentials of the connection to the driver. TCP
// (dns:///) targets require them and they must be TLS (security protocol "tls"); Unix socket
// targets use none (plaintext on the socket) unless these are given.
func WithTransportCredentials(c credentials.TransportCredentials) Option {
	return func(o *options) { o.creds = c }
}

// WithDialOptions adds grpc dial options, applied after the backend's defaults so they override
// them (keepalive, connect backoff, stats handlers, message size limits, ...), to grpc-go's
// client: they need WithFrames(false). Credentials for a TCP target belong in
// WithTransportCredentials, where New can check them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// WithUserAgent sets the user-agent of the backend's own calls — readiness probes, the
// gateway's capability fetches, and calls whose caller sent none — which the transport's
// token follows ("grpc-go/1.85.0", or "grpc-go-h2grpc/1" with WithFrames). A caller's call
// carries the caller's user-agent instead (see agents.go). Default: the token alone.
func WithUserAgent(ua string) Option {
	return func(o *options) { o.userAgent = ua }
}

// WithReadyTimeout bounds the Identity/Probe call of Ready (default 2 s; the caller's deadline
// applies too when it is earlier).
func WithReadyTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.readyTimeout = d
		}
	}
}

// targetKind is the transport a target names.
type targetKind int

const (
	unixTarget targetKind = iota + 1
	tcpTarget
)

// parseTarget checks target and says which transport it names. Errors start with key, the
// config key of the target ("backends.NAME.target", "backends.NAME.targets[1]").
func parseTarget(key, target string) (targetKind, error) {
	bad := func(format string, args ...any) (targetKind, error) {
		return 0, fmt.Errorf("%s: %q: %s", key, target, fmt.Sprintf(format, args...))
	}
	if target == "" {
		return 0, fmt.Errorf("%s: required (unix:///abs/path.sock or dns:///host:port)", key)
	}
	u, err := url.Parse(target)
	if err != nil {
		return bad("not a URL: %v", err)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return bad("a target takes no query or fragment")
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || (u.Opaque != "" && !strings.HasPrefix(u.Opaque, "/")) {
			return bad("the socket path must be absolute: write unix:///abs/path.sock")
		}
		p := u.Path
		if p == "" {
			p = u.Opaque
		}
		if p == "" || !path.IsAbs(p) {
			return bad("the socket path must be absolute: write unix:///abs/path.sock")
		}
		if strings.HasSuffix(p, "/") {
			return bad("the socket path names a directory")
		}
		return unixTarget, nil
	case "dns":
		endpoint := strings.TrimPrefix(u.Path, "/")
		host, port, err := net.SplitHostPort(endpoint)
		if err != nil || host == "" || port == "" {
			return bad("a TCP target is dns:///host:port")
		}
		return tcpTarget, nil
	default:
		return bad("unsupported target: use unix:///abs/path.sock or dns:///host:port")
	}
}

// checkCredentials refuses a TCP target without TLS: the gateway never sends CSI calls (which
// carry secrets) in clear over a network.
// key is the target's config key, as for parseTarget.
func checkCredentials(name, key, target string, kind targetKind, creds credentials.TransportCredentials) error {
	if kind != tcpTarget {
		return nil
	}
	if creds == nil {
		return fmt.Errorf("%s: %q: TLS is required for TCP targets; configure TLS for this backend (backends.%s.tls)", key, target, name)
	}
	if p := creds.Info().SecurityProtocol; p != "tls" {
		return fmt.Errorf("%s: %q: TLS is required for TCP targets, got %q credentials; configure TLS for this backend (backends.%s.tls)", key, target, p, name)
	}
	return nil
}

// Validate checks c as New does before it dials, for backend name, and reports every problem
// with its key: the targets, and TLS on a TCP target (withTLS: the backend has TLS
// configured).
func (c Config) Validate(name string, withTLS bool) error {
	addrs, keys, err := c.targetList(name)
	if err != nil {
		return err
	}
	var errs []error
	for i, addr := range addrs {
		kind, err := parseTarget(keys[i], addr)
		if err == nil && !withTLS {
			err = checkCredentials(name, keys[i], addr, kind, nil)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
