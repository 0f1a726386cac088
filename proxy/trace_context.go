package proxy

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
)

// traceContextOnly is the stats handler of a gateway with tracing off: it extracts the
// caller's trace context (traceparent, tracestate, baggage) from the call's metadata into its
// context, as otelgrpc's server handler does, and records nothing. It reads only the keys the
// propagator asks for, instead of copying the call's whole metadata.
type traceContextOnly struct {
	prop propagation.TextMapPropagator
}

func (h traceContextOnly) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return h.prop.Extract(ctx, incomingCarrier{ctx})
}

func (traceContextOnly) HandleRPC(context.Context, stats.RPCStats) {}

func (traceContextOnly) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (traceContextOnly) HandleConn(context.Context, stats.ConnStats) {}

// incomingCarrier reads a call's incoming metadata for a propagator's Extract.
type incomingCarrier struct{ ctx context.Context }

func (c incomingCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (incomingCarrier) Set(string, string) {} // Extract never sets

func (c incomingCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	return keys
}
