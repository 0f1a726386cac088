package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// newLogger returns the logger a subcommand writes to w (its stderr): JSON, or text when
// format is "text". A duration is written as its String ("grace":"30s"), not as the JSON
// handler's nanoseconds; a call's duration is logged as a number, duration_ms.
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationAsString}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationAsString is the loggers' slog.HandlerOptions.ReplaceAttr: a time.Duration value
// becomes its String, in groups too.
func durationAsString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// logCalls is the reference appliance's call log (the gateway's own is in proxy): one line per
// unary call: method, code and duration. It logs no request or
// response content, so no secret can reach the log through it.
func logCalls(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		st := status.Convert(err)
		level := slog.LevelInfo
		if err != nil {
			level = slog.LevelWarn
		}
		log.LogAttrs(ctx, level, "call", slog.String("method", info.FullMethod), slog.String("code", st.Code().String()),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000), slog.String("message", st.Message()))
		return resp, err
	}
}
