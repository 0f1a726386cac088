package tracing

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Option adjusts NewProvider.
type Option func(*options)

type options struct {
	writer     io.Writer
	exporter   sdktrace.SpanExporter
	processors []sdktrace.SpanProcessor
}

// WithWriter sets where the stdout exporter writes (default os.Stdout). w must be safe for
// use from the exporter's goroutine; it is not closed.
func WithWriter(w io.Writer) Option {
	return func(o *options) {
		if w != nil {
			o.writer = w
		}
	}
}

// WithExporter sends spans to e (batched) instead of the exporter Config.Exporter names, even
// when that is none. Shutdown shuts e down. For tests and for exporters this package does not
// build.
func WithExporter(e sdktrace.SpanExporter) Option {
	return func(o *options) { o.exporter = e }
}

// WithSpanProcessor adds p to the provider, after the exporter's batching processor; with
// Exporter none, p alone receives the spans. For tests (tracetest.NewSpanRecorder) and for
// processors that enrich spans.
func WithSpanProcessor(p sdktrace.SpanProcessor) Option {
	return func(o *options) {
		if p != nil {
			o.processors = append(o.processors, p)
		}
	}
}

// ErrorHandler returns an otel.ErrorHandler that writes the errors of OpenTelemetry's
// background work (failed exports, mostly) to log at warn level, for otel.SetErrorHandler.
// Without it they go to the standard library's log package.
func ErrorHandler(log *slog.Logger) otel.ErrorHandler {
	return otel.ErrorHandlerFunc(func(err error) {
		log.LogAttrs(context.Background(), slog.LevelWarn, "tracing", slog.String("error", err.Error()))
	})
}
