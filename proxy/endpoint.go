package proxy

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
)

// Endpoint is a parsed listener or target address: unix:///abs/path.sock or tcp://host:port.
type Endpoint struct {
	// Scheme is "unix" or "tcp".
	Scheme string
	// Address is the socket path (unix) or host:port (tcp).
	Address string
}

func (e Endpoint) String() string {
	if e.Scheme == "unix" {
		return "unix://" + e.Address
	}
	return e.Scheme + "://" + e.Address
}

// UnmarshalText parses an endpoint (ParseEndpoint), so that a configuration holds it parsed.
func (e *Endpoint) UnmarshalText(text []byte) error {
	v, err := ParseEndpoint(string(text))
	if err == nil {
		*e = v
	}
	return err
}

// ParseEndpoint parses an endpoint as the CSI spec writes CSI_ENDPOINT: "unix://" followed by
// an absolute path (unix:///var/run/csi.sock; the legacy unix:/path form is accepted too), or
// "tcp://host:port". The error says what form was expected.
func ParseEndpoint(s string) (Endpoint, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return Endpoint{}, fmt.Errorf("endpoint %q: want unix:///absolute/path.sock or tcp://host:port", s)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#") {
		// As a URL, the address would end at the '?' or '#', and the gateway would listen
		// on (or dial) another path than the one written, as gRPC's clients would.
		return Endpoint{}, fmt.Errorf("endpoint %q: '?' and '#' cannot appear in an endpoint (a URL ends its path there); rename the socket's path", s)
	}
	switch strings.ToLower(u.Scheme) {
	case "unix":
		path := u.Path
		if u.Host != "" { // unix://relative/path parses the first segment as a host
			return Endpoint{}, fmt.Errorf("endpoint %q: a unix socket path must be absolute (unix:///path)", s)
		}
		if path == "" {
			path = u.Opaque // unix:/path
		}
		if !filepath.IsAbs(path) {
			return Endpoint{}, fmt.Errorf("endpoint %q: a unix socket path must be absolute (unix:///path)", s)
		}
		return Endpoint{Scheme: "unix", Address: filepath.Clean(path)}, nil
	case "tcp":
		if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" || u.Path != "" {
			return Endpoint{}, fmt.Errorf("endpoint %q: want tcp://host:port", s)
		}
		return Endpoint{Scheme: "tcp", Address: u.Host}, nil
	default:
		return Endpoint{}, fmt.Errorf("endpoint %q: scheme %q is not supported; use unix:// or tcp://", s, u.Scheme)
	}
}
