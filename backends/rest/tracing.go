package rest

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/csi-gateway/csi-gateway/backends"
)

// WithTracerProvider makes one client span per HTTP attempt (so a retried call has one span
// per try, each a child of the span in the call's context), with otelhttp and spans from tp,
// and sends the span's W3C trace context in the request headers (traceparent, tracestate,
// baggage). Each span is named "POST /csi.v1.Service/Method" and carries csi.backend,
// csi.attempt (1 for the first try) and otelhttp's http.* and url.* attributes; no header
// other than the trace context, and no body, is recorded.
//
// Requests made outside any trace (Ready's probes) get no span. Without this option the
// backend makes no spans and sends no trace context.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithPropagator sets how WithTracerProvider's spans are sent to the appliance (default:
// otel's global propagator, which the gateway sets to tracing.Propagator()).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(o *options) { o.propagator = p }
}

// tracingTransport is otelhttp's transport around the backend's own, which it keeps to close
// its idle connections (otelhttp's transport cannot).
type tracingTransport struct {
	traced http.RoundTripper
	base   http.RoundTripper
}

func newTracingTransport(backend string, base http.RoundTripper, tp trace.TracerProvider, prop propagation.TextMapPropagator) *tracingTransport {
	if base == nil {
		base = http.DefaultTransport
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	return &tracingTransport{base: base, traced: otelhttp.NewTransport(attemptTagger{base},
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(prop),
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
