package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/csi-gateway/csi-gateway/tracing"
)

// startTracing builds the tracer provider from the tracing configuration (and the OTEL_*
// variables it leaves open), installs the W3C propagator, and returns a stop function that
// flushes spans for up to five seconds.
func startTracing(ctx context.Context, c TracingConfig, log *slog.Logger) (trace.TracerProvider, propagation.TextMapPropagator, func(), error) {
	otel.SetErrorHandler(tracing.ErrorHandler(log))
	tp, shutdown, err := tracing.NewProvider(ctx, tracing.Config{
		Exporter: c.Exporter, Endpoint: c.Endpoint, Insecure: c.Insecure,
		SampleRatio: c.SampleRatio, ServiceVersion: buildVersion(),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	prop := tracing.Propagator()
	otel.SetTextMapPropagator(prop)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("tracing: spans not delivered at shutdown", "error", err)
		}
	}
	return tp, prop, stop, nil
}
