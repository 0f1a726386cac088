package proxy

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/redact"
)

// TracingStatsHandler returns the stats handler that gives every call on a listener its
// server span (for Options.StatsHandlers): otelgrpc's server handler with spans from tp, and
// the caller's trace context, if any, taken from the call's metadata by prop (use
// tracing.Propagator()). The span is named after the method ("csi.v1.Controller/CreateVolume")
// and ends when the caller's call does, with otelgrpc's rpc.* attributes; annotateSpan adds
// what the gateway knows about the call.
//
// With tracing off (tp is otel's no-op provider) no span is started: the handler only takes
// the caller's trace context into the call's context (see traceContextOnly), so logs, call
// records and the backends still carry the caller's trace, at a fraction of otelgrpc's cost.
func TracingStatsHandler(tp trace.TracerProvider, prop propagation.TextMapPropagator) stats.Handler {
	if _, off := tp.(noop.TracerProvider); off {
		return traceContextOnly{prop}
	}
	return otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(prop))
}

// annotateSpan sets, on the call's server span (made by TracingStatsHandler),
// what the gateway learnt about the call when it ends: the IDs the request names
// (csi.volume_id, csi.snapshot_id, csi.node_id, csi.name, ... as requestIDs finds them), the
// backend (csi.backend, a key shared with the backends' client spans: backends.AttrBackend)
// and how many attempts it took (csi.attempt), when the gateway answered otherwise than the
// backend the backend's own code and scrubbed message (csi.backend.status_code,
// csi.backend.status_message) and what it changed (csi.repairs) and, on failure, the span status Error with the
// status message the caller gets. The code the caller got is otelgrpc's
// rpc.response.status_code (semantic conventions v1.43.0, like every rpc.* attribute of the
// span): the gateway adds no rpc.* attribute of its own.
//
// It must run outside canonicalize: the message it records is the canonical one, bounded and
// already scrubbed of the request's secret values. ID values are scrubbed too, and no payload
// is ever recorded. When the span does not record (tracing off, or this trace not sampled) it
// costs one context lookup and decodes nothing.
func annotateSpan(r *redact.Redactor) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			err := next(ctx, call)
			span := trace.SpanFromContext(ctx)
			if !span.IsRecording() {
				return err
			}
			st := status.Convert(err)
			attrs := make([]attribute.KeyValue, 0, 8)
			if ids := call.IDs(); ids != nil {
				scrub := call.secrets(r)
				for _, name := range recordedIDFields {
					if v, ok := ids[string(name)]; ok {
						attrs = append(attrs, attribute.String("csi."+string(name), scrub.Scrub(v)))
					}
				}
			}
			if call.Backend != "" {
				attrs = append(attrs, backends.AttrBackend.String(call.Backend),
					backends.AttrAttempt.Int(backends.CallInfoFrom(ctx).Attempts()))
			}
			if rp := call.repaired; rp != nil {
				attrs = append(attrs, attribute.String("csi.backend.status_code", rp.code.String()),
					attribute.String("csi.backend.status_message", rp.message),
					attribute.StringSlice("csi.repairs", rp.kinds))
			}
			span.SetAttributes(attrs...)
			if err != nil {
				span.SetStatus(otelcodes.Error, st.Message())
			}
			return err
		}
	}
}

// traceID returns the trace ID of the call's span, sampled or not (the backends got it too,
// so logs on both sides can be matched), or "" when the call is in no trace.
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
