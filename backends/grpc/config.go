package grpc

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Config is one grpc backend's configuration (backends.NAME in the gateway's config file).
type Config struct {
	// Target is the driver's address: unix:///abs/path.sock (a Unix socket; the path must be
	// absolute), or dns:///host:port (TCP), which is accepted only with TLS credentials given
	// by WithTransportCredentials.
	Target string
}

// Option is an optional setting of New.
type Option func(*options)

type options struct {
	creds          credentials.TransportCredentials
	dialOptions    []grpc.DialOption
	readyTimeout   time.Duration
	tracerProvider trace.TracerProvider          // nil: no client spans (see WithTracerProvider)
	propagator     propagation.TextMapPropagator // nil: otel's global
}

// defaultOptions holds every default in one place.
func defaultOptions() options {
	return options{readyTimeout: 2 * time.Second}
}

// WithTransportCredentials sets the credentials of the connection to the driver. TCP
// (dns:///) targets require them and they must be TLS (security protocol "tls"); Unix socket
// targets use none (plaintext on the socket) unless these are given.
func WithTransportCredentials(c credentials.TransportCredentials) Option {
	return func(o *options) { o.creds = c }
}

// WithDialOptions adds grpc dial options, applied after the backend's defaults so they override
// them (keepalive, connect backoff, stats handlers, message size limits, ...). Credentials for a
// TCP target belong in WithTransportCredentials, where New can check them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
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

// parseTarget checks target and says which transport it names. Errors name the config key.
func parseTarget(name, target string) (targetKind, error) {
	bad := func(format string, args ...any) (targetKind, error) {
		return 0, fmt.Errorf("backends.%s.target: %q: %s", name, target, fmt.Sprintf(format, args...))
	}
	if target == "" {
		return 0, fmt.Errorf("backends.%s.target: required (unix:///abs/path.sock or dns:///host:port)", name)
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
func checkCredentials(name, target string, kind targetKind, creds credentials.TransportCredentials) error {
	if kind != tcpTarget {
		return nil
	}
	if creds == nil {
		return fmt.Errorf("backends.%s.target: %q: TLS is required for TCP targets; configure TLS for this backend (backends.%s.tls)", name, target, name)
	}
	if p := creds.Info().SecurityProtocol; p != "tls" {
		return fmt.Errorf("backends.%s.target: %q: TLS is required for TCP targets, got %q credentials; configure TLS for this backend (backends.%s.tls)", name, target, p, name)
	}
	return nil
}
