package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/csi-gateway/csi-gateway/backends"
)

// readyTimeout bounds Ready when the caller's context allows longer.
const readyTimeout = 5 * time.Second

// probePath is the method Ready calls.
const probePath = "/csi.v1.Identity/Probe"

// Backend sends CSI calls to a storage appliance that speaks the connect protocol
// (docs/rest-protocol.md): each unary call is one POST of the request as protojson,
// retried and failed over as retry.go describes. It implements backends.Backend and is
// safe for concurrent use.
type Backend struct {
	name   string
	cfg    Config
	urls   []baseURL
	client *http.Client // never follows redirects
	timed  *http.Client // client with cfg.RequestTimeout per attempt, for calls without a deadline

	breakers []*backends.Breaker   // one per URL, in order; nil entries when disabled
	budget   *backends.RetryBudget // nil when disabled

	preferred atomic.Int32 // index in urls of the URL that answered last; calls start there
	closed    atomic.Bool
	methods   sync.Map // method path → *method; only methods found, so it stays small
}

var _ backends.Backend = (*Backend)(nil)

// New returns the backend called name (the key under "backends" in the configuration,
// used in every message) for cfg. It checks cfg and reports every problem with its key
// path ("backends.NAME.urls[1]: ..."), never repeating credentials found in a URL. It
// opens no connection: an appliance that is down does not fail New, and Ready reports it.
func New(name string, cfg Config, opts ...Option) (*Backend, error) {
	if name == "" {
		return nil, errors.New("rest backend: a name is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, PrefixErrors("backends."+name+".", err)
	}
	urls := make([]baseURL, len(cfg.URLs))
	for i, raw := range cfg.URLs {
		urls[i], _ = parseBaseURL(raw) // checked by withDefaults
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	client := *NewHTTPClient(name, opts...)
	if cfg.Auth.configured() {
		client.Transport = newAuthTransport(name, cfg.Auth, client.Transport)
	}
	timed := client
	if timed.Timeout == 0 || cfg.RequestTimeout < timed.Timeout {
		timed.Timeout = cfg.RequestTimeout
	}
	b := &Backend{name: name, cfg: cfg, urls: urls, client: &client, timed: &timed}
	b.guard(o.now)
	return b, nil
}

// NewHTTPClient returns the HTTP client a backend called name sends its requests with, as
// opts set it up (WithHTTPClient, WithTLSConfig, WithTracing): never
// following redirects (a redirect would resend the request, credentials included, to
// another address), with a client span per request when tracing is on.
func NewHTTPClient(name string, opts ...Option) *http.Client {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	base := o.client
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32 // calls to one appliance run in parallel; the default keeps 2
		if o.tlsConfig != nil {
			t.TLSClientConfig = o.tlsConfig.Clone()
		}
		base = &http.Client{Transport: t}
	}
	client := *base
	if o.tracing.Enabled() {
		client.Transport = newTracingTransport(name, client.Transport, o.tracing)
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client
}

// PrefixErrors puts prefix before each of the joined errors in err.
func PrefixErrors(prefix string, err error) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			errs = append(errs, fmt.Errorf("%s%w", prefix, e))
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("%s%w", prefix, err)
}

// Unary sends one call. method is the full method name, such as
// "/csi.v1.Controller/CreateVolume", and req and the returned response are protobuf wire
// bytes; the backend converts them to and from protojson. Failures are *backends.Error:
// ClassUnimplemented for a method that is not a unary method of a known service,
// ClassInvalid for a request that does not decode or holds fields the gateway does not know
// (unknown.go), ClassPrecondition for CSI secrets bound for an http:// URL without the
// operator's opt-in (plaintext.go), the class of the appliance's answer
// (errors.go) or of the transport failure, ClassCanceled or ClassDeadline when ctx ends,
// and ClassInternal for a 200 whose body is not the response message.
func (b *Backend) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	m, err := b.method(method)
	if err != nil {
		return nil, err
	}
	if b.closed.Load() {
		return nil, newError(backends.ClassUnavailable, b.name, m.name, "the backend is closed (the gateway is shutting down or reloading)")
	}
	if err := ctx.Err(); err != nil {
		return nil, (&call{b: b, m: m}).contextError(err)
	}
	msg, err := m.decodeRequest(req)
	if err != nil {
		return nil, newError(backends.ClassInvalid, b.name, m.name,
			fmt.Sprintf("the request is not a valid %s: %s", m.in.Descriptor().FullName(), Clean(err.Error(), maxSaid)))
	}
	if err := b.refuseUnknownFields(m, msg); err != nil {
		return nil, err
	}
	if err := b.refusePlaintextSecrets(m, msg); err != nil {
		return nil, err
	}
	body, err := protojson.Marshal(msg)
	if err != nil {
		return nil, newError(backends.ClassInvalid, b.name, m.name,
			fmt.Sprintf("the request cannot be written as JSON: %s", Clean(err.Error(), maxSaid)))
	}
	out, err := b.post(ctx, m, body, b.policy())
	if err != nil {
		return nil, err
	}
	resp, err := m.responseProto(out)
	if err != nil {
		return nil, &backends.Error{Class: backends.ClassInternal, Message: backends.Truncate(fmt.Sprintf(
			"backend %q answered %s with a body that is not a %s: %s", b.name, m.name, m.outName(), Clean(err.Error(), maxSaid)), backends.MaxMessageBytes)}
	}
	return resp, nil
}

// method returns the unary method called path, or a ClassUnimplemented *backends.Error.
func (b *Backend) method(path string) (*method, error) {
	if m, ok := b.methods.Load(path); ok {
		return m.(*method), nil
	}
	m, err := lookupMethod(path)
	if err != nil {
		return nil, newError(backends.ClassUnimplemented, b.name, backends.Truncate(Clean(path, 128), 128), err.Error())
	}
	b.methods.Store(path, m)
	return m, nil
}

func (b *Backend) policy() attemptPolicy {
	return attemptPolicy{maxAttempts: b.cfg.Retry.MaxAttempts, minBackoff: b.cfg.Retry.MinBackoff, maxBackoff: b.cfg.Retry.MaxBackoff}
}

// Stream always fails with ClassUnimplemented: the connect protocol has no streaming
// calls here. Route streaming methods to a grpc backend.
func (b *Backend) Stream(_ context.Context, method string, _ grpc.ServerStream) error {
	return newError(backends.ClassUnimplemented, b.name, backends.Truncate(Clean(method, 128), 128), errStreaming.Error())
}

// Ready calls the appliance's Probe, trying each URL once (starting with the one that
// answered last) within a short timeout. It returns nil when a URL answers 200 with
// "ready" true or absent; a ClassUnavailable *backends.Error when the appliance answers
// "ready": false (it is warming up); otherwise the call's classified error.
func (b *Backend) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	m, err := b.method(probePath)
	if err != nil {
		return err
	}
	if b.closed.Load() {
		return newError(backends.ClassUnavailable, b.name, m.name, "the backend is closed")
	}
	out, err := b.post(ctx, m, []byte("{}"), attemptPolicy{maxAttempts: len(b.urls), failoverOnly: true})
	if err != nil {
		return err
	}
	var resp csi.ProbeResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(out, &resp); err != nil {
		return &backends.Error{Class: backends.ClassInternal, Message: backends.Truncate(fmt.Sprintf(
			"backend %q answered Probe with a body that is not a ProbeResponse: %s", b.name, Clean(err.Error(), maxSaid)), backends.MaxMessageBytes)}
	}
	if r := resp.GetReady(); r != nil && !r.GetValue() {
		return newError(backends.ClassUnavailable, b.name, m.name, "the appliance is not ready (its Probe answered ready=false; it may be starting)")
	}
	return nil
}

// Close makes every later call fail with ClassUnavailable and closes the idle connections
// of the HTTP client. Calls in flight run to their end. Close is idempotent.
func (b *Backend) Close() error {
	b.closed.Store(true)
	b.client.CloseIdleConnections()
	return nil
}
