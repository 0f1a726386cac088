package backends

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ClientTracing is how a backend traces its calls to the storage behind it, each backend
// with the instrumentation of its own protocol (otelgrpc, otelhttp): one client span per
// call or attempt, a child of the span in the call's context, from Provider, whose W3C trace
// context is sent with Propagator. A call made outside any trace (Ready's probes) gets no
// span; the zero value makes none.
type ClientTracing struct {
	Provider   trace.TracerProvider          // nil: no client spans
	Propagator propagation.TextMapPropagator // nil: otel's global propagator
}

// Enabled reports whether the backend makes client spans.
func (t ClientTracing) Enabled() bool { return t.Provider != nil }

// PropagatorOrGlobal returns Propagator, or otel's global propagator (which the gateway sets
// to tracing.Propagator()) when it is nil.
func (t ClientTracing) PropagatorOrGlobal() propagation.TextMapPropagator {
	if t.Propagator == nil {
		return otel.GetTextMapPropagator()
	}
	return t.Propagator
}
