package grpcbackend

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
)

// clientTracing is otelgrpc's client stats handler, limited to calls made in a trace and kept
// from recording the driver's error messages.
type clientTracing struct {
	otel stats.Handler
}

// untracedKey marks the context of a call clientTracing leaves alone.
type untracedKey struct{}

func newClientTracing(backend string, t backends.ClientTracing) stats.Handler {
	return &clientTracing{otel: otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(t.Provider),
		otelgrpc.WithPropagators(t.PropagatorOrGlobal()),
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
