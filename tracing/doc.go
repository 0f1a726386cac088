// Package tracing sets up the OpenTelemetry tracer provider from configuration and the
// standard OTEL_* variables, and returns its shutdown function. It instruments nothing itself:
// the gateway's server and backend clients take the provider (and Propagator) as options and
// make their spans with otelgrpc and otelhttp.
//
// Precedence follows the OpenTelemetry convention: the OTEL_* variables are the defaults, and
// what Config says explicitly overrides them. The exporter is chosen as the specification
// says (an endpoint alone means otlp), with one deviation: with no exporter and no endpoint
// set anywhere, spans are not exported (see exporterKind). A zero field of Config (an empty Exporter or
// Endpoint, Insecure false, a negative SampleRatio, an empty ServiceName) says nothing and
// leaves the choice to the variables, then to the built-in default. See NewProvider for the
// list of variables.
//
// The package refuses to hold state: no package-level provider, no global set behind the
// caller's back. The caller decides whether to install the provider and Propagator as the
// globals (otel.SetTracerProvider, otel.SetTextMapPropagator).
package tracing
