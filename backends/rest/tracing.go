package rest

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/csi-gateway/csi-gateway/backends"
)

// tracingTransport is otelhttp's transport around the backend's own, which it keeps to close
// its idle connections (otelhttp's transport cannot).
type tracingTransport struct {
	traced http.RoundTripper
	base   http.RoundTripper
}

func newTracingTransport(backend string, base http.RoundTripper, t backends.ClientTracing) *tracingTransport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &tracingTransport{base: base, traced: otelhttp.NewTransport(attemptTagger{base},
		otelhttp.WithTracerProvider(t.Provider),
		otelhttp.WithPropagators(t.PropagatorOrGlobal()),
		otelhttp.WithSpanOptions(trace.WithAttributes(backends.AttrBackend.String(backend))),
		otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanContextFromContext(r.Context()).IsValid() }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }),
	)}
}

func (t *tracingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.traced.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the backend's transport.
func (t *tracingTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// attemptTagger runs inside otelhttp's transport, where the request's context holds the
// attempt's span: it numbers the span with the call's attempt count (csi.attempt, from 1) and,
// on a retry, with the semantic conventions' http.request.resend_count (from 1 on the second
// attempt).
type attemptTagger struct{ base http.RoundTripper }

func (t attemptTagger) RoundTrip(r *http.Request) (*http.Response, error) {
	// http.Client calls RoundTrip on the goroutine that runs the call's attempts, after
	// beforeAttempt has counted this one: reading c.attempts here needs no lock.
	if c, ok := r.Context().Value(callKey{}).(*call); ok {
		span := trace.SpanFromContext(r.Context())
		span.SetAttributes(backends.AttrAttempt.Int(c.attempts))
		if c.attempts > 1 {
			span.SetAttributes(semconv.HTTPRequestResendCount(c.attempts - 1))
		}
	}
	return t.base.RoundTrip(r)
}

type callKey struct{}

// withCall returns ctx carrying c, for attemptTagger.
func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}
