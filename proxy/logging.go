package proxy

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/redact"
)

// logCalls writes one line per call when it ends: method, code, duration, caller, the IDs
// the request names, backend and attempts; when the gateway answered otherwise than the
// backend, the backend's code and (scrubbed) message and what was repaired; at debug level also the request and response,
// redacted by schema (secrets, mount flags, context values) and scrubbed of the request's
// secret values. Error messages have already been scrubbed by canonicalize.
func logCalls(log *slog.Logger, r *redact.Redactor) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			err := next(ctx, call)
			st := status.Convert(err)
			level := slog.LevelInfo
			if err != nil {
				level = slog.LevelWarn
			}
			if !log.Enabled(ctx, level) {
				return err
			}
			attrs := make([]slog.Attr, 0, 12)
			attrs = append(attrs,
				slog.String("method", call.MethodName()),
				slog.String("code", st.Code().String()),
				slog.Float64("duration_ms", float64(time.Since(call.Start).Microseconds())/1000),
			)
			if id, ok := auth.FromContext(ctx); ok {
				attrs = append(attrs, slog.String("caller", id.String()))
			}
			attrs = append(attrs, idAttrs(call.IDs())...)
			if id := traceID(ctx); id != "" {
				attrs = append(attrs, slog.String("trace_id", id))
			}
			if call.Backend != "" {
				attrs = append(attrs, slog.String("backend", call.Backend),
					slog.Int("attempts", backends.CallInfoFrom(ctx).Attempts()))
			}
			if err != nil {
				attrs = append(attrs, slog.String("error", st.Message()))
			}
			attrs = append(attrs, call.repaired.logAttrs()...)
			if log.Enabled(ctx, slog.LevelDebug) {
				req, _ := call.DecodedRequest()
				attrs = append(attrs, payloadAttrs(call, req, r)...)
			}
			log.LogAttrs(ctx, level, "call", attrs...)
			return err
		}
	}
}

// idAttrs returns a call's identifying fields in a stable order.
func idAttrs(ids map[string]string) []slog.Attr {
	var out []slog.Attr
	for _, name := range recordedIDFields {
		if v, ok := ids[string(name)]; ok {
			out = append(out, slog.String(string(name), v))
		}
	}
	return out
}

// payloadAttrs renders the redacted request and response for debug logs.
func payloadAttrs(call *Call, req proto.Message, r *redact.Redactor) []slog.Attr {
	scrub := call.secrets(r)
	var out []slog.Attr
	if req != nil {
		out = append(out, slog.String("request", scrub.Scrub(r.JSON(req))))
	}
	if resp, err := call.DecodedResponse(); err == nil && resp != nil {
		out = append(out, slog.String("response", scrub.Scrub(r.JSON(resp))))
	}
	return out
}
