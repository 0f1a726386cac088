package grpcbackend

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
)

// WithTracerProvider makes one client span per call to the driver (a child of the span in the
// call's context), with otelgrpc's stats handler and spans from tp, and sends the span's
// W3C trace context to the driver in the call's metadata (traceparent, tracestate, baggage),
// in place of any the caller sent. Each span carries csi.backend and csi.attempt.
//
// Calls made outside any trace (Ready's probes) get no span. A span's status never carries the
// driver's error message (it may echo a secret of the request; the gateway's server span has
// the scrubbed one): a failed call's span says Error and the code's name. Without this option
// the backend makes no spans, and the caller's own trace metadata is forwarded unchanged.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithPropagator sets how WithTracerProvider's spans are sent to the driver (default: otel's
// global propagator, which the gateway sets to tracing.Propagator()).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(o *options) { o.propagator = p }
}

// clientTracing is otelgrpc's client stats handler, limited to calls made in a trace and kept
// from recording the driver's error messages.
type clientTracing struct {
	otel stats.Handler
}

// untracedKey marks the context of a call clientTracing leaves alone.
type untracedKey struct{}

func newClientTracing(backend string, tp trace.TracerProvider, prop propagation.TextMapPropagator) stats.Handler {
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	return &clientTracing{otel: otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(prop),
		otelgrpc.WithSpanAttributes(backends.AttrBackend.String(backend)),
	)}
}

func (h *clientTracing) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return context.WithValue(ctx, untracedKey{}, true)
	}
	ctx = h.otel.TagRPC(ctx, info)
	// The backend counted this attempt before sending it (Unary, Stream).
	if n := backends.CallInfoFrom(ctx).Attempts(); n > 0 {
		trace.SpanFromContext(ctx).SetAttributes(backends.AttrAttempt.Int(n))
	}
	return ctx
}

func (h *clientTracing) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	if ctx.Value(untracedKey{}) != nil {
		return
	}
	if end, ok := rs.(*stats.End); ok && end.Error != nil {
		// otelgrpc puts the status message in the span's status description.
		code := status.Code(end.Error)
		e := *end
		e.Error = status.Error(code, code.String())
		rs = &e
	}
	h.otel.HandleRPC(ctx, rs)
}

func (h *clientTracing) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return h.otel.TagConn(ctx, info)
}

func (h *clientTracing) HandleConn(ctx context.Context, cs stats.ConnStats) {
	h.otel.HandleConn(ctx, cs)
}
