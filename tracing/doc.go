// Package tracing sets up the OpenTelemetry tracer provider from configuration and the
// standard OTEL_* variables, and returns its shutdown function. It instruments nothing itself.
package tracing
