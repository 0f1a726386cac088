package rest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxAttempts    = 5
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
)

// Config describes one REST backend. Zero values take the defaults above. The field
// comments name the configuration keys (under backends.NAME) that errors refer to.
type Config struct {
	// URLs (urls) are the appliance's base URLs in failover order: http:// or https://, a
	// host, optionally a port and a path prefix; no credentials, query or fragment.
	// A call to "/csi.v1.Controller/CreateVolume" is sent to base + that path. At least one.
	URLs []string
	// Retry (retry) says how often and how patiently a failed call is retried.
	Retry Retry
	// RequestTimeout (requestTimeout) bounds each attempt of a call whose context has no
	// deadline. A call with a deadline is bounded by it alone.
	RequestTimeout time.Duration
	// Breaker (circuitBreaker) is the circuit breaker kept for each URL: a URL whose
	// circuit is open is skipped, and when every URL's is, calls fail fast (guard.go).
	Breaker backends.BreakerConfig
	// Budget (retryBudget) bounds the retries of all calls together to a fraction of the
	// calls, so that an outage does not multiply the load (guard.go).
	Budget backends.BudgetConfig
	// Auth (auth) are the credentials files sent with every request (auth.go); https only.
	Auth Auth
	// AllowSecretsOverPlaintextHTTP (allowSecretsOverPlaintextHTTP) lets requests that carry
	// CSI secrets go to http:// URLs, in the clear; without it they are refused
	// (plaintext.go).
	AllowSecretsOverPlaintextHTTP bool
}

// Retry is the retry policy of a backend; see retry.go for what is retried.
type Retry struct {
	// MaxAttempts (maxAttempts) is how many times a call is sent at most, the first
	// attempt included; 1 disables retries.
	MaxAttempts int
	// MinBackoff (minBackoff) and MaxBackoff (maxBackoff) bound the wait between attempts.
	// The appliance's Retry-After is honoured; one longer than MaxBackoff ends the retries.
	MinBackoff, MaxBackoff time.Duration
}

// Validate checks c and reports every problem, each prefixed with the key it is about
// relative to the backend ("urls[1]: ...", "retry.maxBackoff: ..."). A URL is never
// repeated with its credentials.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults fills the zero fields of c and checks the result.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if len(c.URLs) == 0 {
		errs = append(errs, errors.New("urls: at least one URL is required, such as https://array.example:8443"))
	}
	for i, raw := range c.URLs {
		if _, err := parseBaseURL(raw); err != nil {
			errs = append(errs, fmt.Errorf("urls[%d]: %w", i, err))
		}
	}
	errs = append(errs, c.Auth.validate(c.URLs)...)
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if c.Retry.MinBackoff == 0 {
		c.Retry.MinBackoff = DefaultMinBackoff
	}
	if c.Retry.MaxBackoff == 0 {
		c.Retry.MaxBackoff = DefaultMaxBackoff
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Retry.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("retry.maxAttempts: %d is negative; use 1 for no retries", c.Retry.MaxAttempts))
	}
	if c.Retry.MinBackoff < 0 {
		errs = append(errs, fmt.Errorf("retry.minBackoff: %v is negative", c.Retry.MinBackoff))
	}
	if c.Retry.MaxBackoff < 0 {
		errs = append(errs, fmt.Errorf("retry.maxBackoff: %v is negative", c.Retry.MaxBackoff))
	}
	if c.Retry.MinBackoff > c.Retry.MaxBackoff && c.Retry.MaxBackoff > 0 {
		errs = append(errs, fmt.Errorf("retry.maxBackoff: %v is shorter than retry.minBackoff (%v)", c.Retry.MaxBackoff, c.Retry.MinBackoff))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("requestTimeout: %v is negative", c.RequestTimeout))
	}
	var err error
	c.Breaker, err = c.Breaker.WithDefaults()
	errs = append(errs, eachPrefixed("circuitBreaker.", err)...)
	c.Budget, err = c.Budget.WithDefaults()
	errs = append(errs, eachPrefixed("retryBudget.", err)...)
	return c, errors.Join(errs...)
}

// baseURL is one validated entry of Config.URLs.
type baseURL struct {
	u       *url.URL // scheme, host and path prefix without a trailing slash
	display string   // scheme://host, safe to print
}

// parseBaseURL checks one configured URL. Its errors never contain the URL's userinfo,
// query or fragment, and a parse error is shown only when the text has no userinfo in it
// (url.Parse's errors quote the whole text).
func parseBaseURL(raw string) (baseURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && !strings.Contains(raw, "@") {
			return baseURL{}, fmt.Errorf("not a valid URL: %v; write it as https://host[:port][/path]", ue.Err)
		}
		return baseURL{}, errors.New("not a valid URL; write it as https://host[:port][/path]")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		// Only the scheme is shown: without "//", url.Parse takes "user:password@host" for
		// the scheme "user" and an opaque rest.
		return baseURL{}, fmt.Errorf("scheme %q is not supported; write the URL as https://host[:port][/path] (or http://)", u.Scheme)
	}
	display := safeURL(u)
	switch {
	case u.User != nil:
		return baseURL{}, fmt.Errorf("%s: credentials do not belong in the URL; remove them (the gateway never sends or prints them from here)", display)
	case u.Host == "" || u.Hostname() == "":
		return baseURL{}, fmt.Errorf("%s: the URL has no host; write it as %s://host[:port][/path]", display, u.Scheme)
	case u.RawQuery != "" || u.ForceQuery:
		return baseURL{}, fmt.Errorf("%s: the URL has a query; a base URL is scheme, host, port and path only", display)
	case u.Fragment != "":
		return baseURL{}, fmt.Errorf("%s: the URL has a fragment; a base URL is scheme, host, port and path only", display)
	case u.Opaque != "":
		return baseURL{}, fmt.Errorf("%s: write the URL as %s://host[:port][/path]", display, u.Scheme)
	}
	base := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: strings.TrimRight(u.Path, "/")}
	return baseURL{u: base, display: display}, nil
}

// safeURL is the part of u that may be printed: scheme and host, never userinfo, path,
// query or fragment.
func safeURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host
}

// endpoint returns the URL of method (such as "/csi.v1.Controller/CreateVolume") on b.
func (b baseURL) endpoint(method string) *url.URL {
	u := *b.u
	u.Path += method
	return &u
}

// Option adjusts New.
type Option func(*options)

type options struct {
	client    *http.Client
	tlsConfig *tls.Config
	tracing   backends.ClientTracing // see WithTracing
	now       func() time.Time       // nil: time.Now; tests set a fake clock
}

// WithTracing makes one client span per HTTP attempt (so a retried call has one span per
// try, each a child of the span in the call's context), with otelhttp and spans from
// t.Provider, and sends the span's W3C trace context in the request headers (traceparent,
// tracestate, baggage) with t's propagator. Each span is named "POST /csi.v1.Service/Method"
// and carries csi.backend, csi.attempt (1 for the first try) and otelhttp's http.* and url.*
// attributes; no header other than the trace context, and no body, is recorded.
//
// Requests made outside any trace (Ready's probes) get no span. Without this option (or with
// a nil t.Provider) the backend makes no spans and sends no trace context.
func WithTracing(t backends.ClientTracing) Option {
	return func(o *options) { o.tracing = t }
}

// WithHTTPClient makes the backend send its requests with c, for example one whose
// transport carries the backend's TLS configuration. The backend uses a copy of c that
// never follows redirects (a redirect would resend the request, secrets included, to
// another address) and, for calls without a deadline, adds Config.RequestTimeout. c's
// transport is shared, not owned: Close only closes its idle connections. A nil c keeps
// the default, a client of its own on a clone of http.DefaultTransport.
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) {
		if c != nil {
			o.client = c
		}
	}
}

// WithTLSConfig makes the backend's own client (the one used without WithHTTPClient) dial
// https:// URLs with cfg, such as a tlsconf.Client's configuration: a pinned CA bundle and
// a client certificate. It has no effect together with WithHTTPClient, whose transport
// carries its own TLS configuration.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) { o.tlsConfig = cfg }
}
