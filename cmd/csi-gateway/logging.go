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
// format is "text".
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
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
