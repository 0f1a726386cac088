package tracing

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The exporters Config.Exporter names.
const (
	ExporterNone     = "none"     // no spans leave the process; trace context still propagates
	ExporterOTLP     = "otlp"     // OTLP over gRPC, to a collector at host:port (default localhost:4317)
	ExporterOTLPHTTP = "otlphttp" // OTLP over HTTP (protobuf), to a collector URL (default http://localhost:4318/v1/traces)
	ExporterStdout   = "stdout"   // one JSON object per span, to WithWriter's writer (default os.Stdout)
	ExporterConsole  = "console"  // stdout, by the name OTEL_TRACES_EXPORTER gives it
)

// DefaultServiceName is the service.name of the spans when neither Config.ServiceName nor
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) gives one.
const DefaultServiceName = "csi-gateway"

// Config selects where spans go and how many are kept. It mirrors the gateway's `tracing:`
// configuration section, whose key names the errors use.
type Config struct {
	// Exporter is none, otlp, otlphttp, stdout or console (stdout by another name), the
	// names OTEL_TRACES_EXPORTER accepts too. otlp is gRPC unless
	// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL says http/protobuf. Empty: OTEL_TRACES_EXPORTER
	// decides (its otlp is http/protobuf unless the protocol variables say grpc), and without
	// it otlp when an endpoint is given (Endpoint, or OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT),
	// else none. See exporterKind for why no endpoint means none.
	Exporter string
	// Endpoint is where the OTLP exporters send spans: host:port, or a URL (http:// means
	// plaintext). For otlphttp a URL without a path gets the standard /v1/traces; a URL with a
	// path is used as it is. Empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT, else the exporter's default. Credentials never belong here:
	// put them in OTEL_EXPORTER_OTLP_HEADERS.
	Endpoint string
	// Insecure sends spans in plaintext (a collector on the same host or pod). False leaves it
	// to the URL's scheme and OTEL_EXPORTER_OTLP_[TRACES_]INSECURE; TLS by default.
	Insecure bool
	// SampleRatio is the fraction of new traces that are recorded, 0 to 1; a call that arrives
	// with a trace context follows its caller's sampling decision (parent-based sampling).
	// Negative: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG decide, and without them every
	// trace is recorded. The zero value records no new trace.
	SampleRatio float64
	// ServiceName and ServiceVersion are the service.name and service.version of every span.
	// An empty ServiceName leaves OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES to decide,
	// then DefaultServiceName.
	ServiceName, ServiceVersion string
}

// NewProvider returns the tracer provider cfg describes and the function that shuts it down.
//
// Exporter none (with no WithExporter or WithSpanProcessor) returns the no-op provider: it
// records nothing, but a span context that arrives with a call still flows through it to the
// backends, so traces started by callers are not broken by the gateway. Otherwise the provider
// is the OpenTelemetry SDK's, with a batching span processor in front of the exporter, a
// parent-based ratio sampler, and a resource naming the service (service.name,
// service.version, service.instance.id: a random ID per process; host.name, process.pid).
//
// The OTEL_* variables are defaults that Config overrides: OTEL_SDK_DISABLED=true (the no-op
// provider, whatever Config says), OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_* and
// OTEL_EXPORTER_OTLP_TRACES_* (endpoint, insecure, headers, timeout, compression, certificates),
// OTEL_TRACES_SAMPLER[_ARG], OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_* (batching)
// and OTEL_SPAN_*_LIMIT. OTEL_PROPAGATORS is not read: Propagator is always W3C.
//
// NewProvider opens no connection: an exporter whose collector is down does not fail it (its
// exports fail later, through otel's error handler; see ErrorHandler). Errors name the
// configuration key at fault. The provider is safe for concurrent use.
//
// shutdown flushes the spans still buffered and stops the exporter; it returns when that is
// done or when ctx ends, whichever is first, so give it a deadline: a collector that cannot be
// reached would otherwise hold it for the exporter's timeout and retries. It is never nil.
func NewProvider(ctx context.Context, cfg Config, opts ...Option) (trace.TracerProvider, func(context.Context) error, error) {
	o := options{writer: os.Stdout}
	for _, opt := range opts {
		opt(&o)
	}
	noShutdown := func(context.Context) error { return nil }
	if sdkDisabled() {
		return noop.NewTracerProvider(), noShutdown, nil
	}
	kind, err := exporterKind(cfg)
	if err != nil {
		return nil, nil, err
	}
	if kind == ExporterNone && o.exporter == nil && len(o.processors) == 0 {
		return noop.NewTracerProvider(), noShutdown, nil
	}
	if math.IsNaN(cfg.SampleRatio) || cfg.SampleRatio > 1 {
		return nil, nil, fmt.Errorf("tracing.sampleRatio: %v is not between 0 and 1", cfg.SampleRatio)
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	exp := o.exporter
	if exp == nil {
		if exp, err = newExporter(ctx, kind, cfg, o.writer); err != nil {
			return nil, nil, err
		}
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.SampleRatio >= 0 {
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))))
	}
	if exp != nil {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	for _, p := range o.processors {
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(p))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	shutdown := func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: flushing spans at shutdown: %w", err)
		}
		return nil
	}
	return tp, shutdown, nil
}

// Propagator returns the W3C Trace Context and Baggage propagator: traceparent and tracestate
// (and baggage) in gRPC metadata and HTTP headers. The caller installs it as the global with
// otel.SetTextMapPropagator, or passes it to what needs one.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// sdkDisabled reports OTEL_SDK_DISABLED=true, the standard switch that turns the SDK off.
func sdkDisabled() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true")
}

// exporterNames are the names Config.Exporter and OTEL_TRACES_EXPORTER both accept, and
// what each stands for; otlp's protocol is resolved by otlpProtocol.
var exporterNames = map[string]string{
	ExporterNone:     ExporterNone,
	ExporterOTLP:     ExporterOTLP,
	ExporterOTLPHTTP: ExporterOTLPHTTP,
	ExporterStdout:   ExporterStdout,
	ExporterConsole:  ExporterStdout,
}

// CheckExporter reports whether name is one Config.Exporter accepts ("" included), with the
// error NewProvider would return, for checking a configuration before building anything.
func CheckExporter(name string) error {
	if _, ok := exporterNames[name]; !ok && name != "" {
		return fmt.Errorf("tracing.exporter: %q is not none, otlp, otlphttp, stdout or console", name)
	}
	return nil
}

// exporterKind resolves the exporter cfg leads to: Config.Exporter, else OTEL_TRACES_EXPORTER,
// else otlp when an endpoint is given (Config.Endpoint, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT), else none. The specification's default is otlp even without
// an endpoint, to localhost; this package does not follow it there: a gateway runs on every
// node, and one that sends its spans to a localhost collector nobody configured fills its log
// with failed exports. OTEL_TRACES_EXPORTER=otlp asks for the localhost default explicitly.
//
// otlp's protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL (grpc,
// http/protobuf), else gRPC when the configuration chose otlp (by name or with its endpoint:
// its otlp has always meant gRPC) and http/protobuf when the environment did (the
// specification's default).
func exporterKind(cfg Config) (string, error) {
	if cfg.Exporter != "" {
		if err := CheckExporter(cfg.Exporter); err != nil {
			return "", err
		}
		return resolveOTLP(exporterNames[cfg.Exporter], ExporterOTLP)
	}
	if v := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); v != "" {
		kind, ok := exporterNames[v]
		if !ok {
			return "", fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported; use otlp, console, none, stdout or otlphttp (or set tracing.exporter)", v)
		}
		return resolveOTLP(kind, ExporterOTLPHTTP)
	}
	switch {
	case strings.TrimSpace(cfg.Endpoint) != "":
		return otlpProtocol(ExporterOTLP)
	case os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		return otlpProtocol(ExporterOTLPHTTP)
	}
	return ExporterNone, nil
}

// resolveOTLP is kind, with otlp resolved to its protocol's exporter (def without one).
func resolveOTLP(kind, def string) (string, error) {
	if kind != ExporterOTLP {
		return kind, nil
	}
	return otlpProtocol(def)
}

// otlpProtocol is the OTLP exporter OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL asks for, or def when neither is set.
func otlpProtocol(def string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	proto := strings.TrimSpace(os.Getenv(name))
	if proto == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		proto = strings.TrimSpace(os.Getenv(name))
	}
	switch proto {
	case "":
		return def, nil
	case "grpc":
		return ExporterOTLP, nil
	case "http/protobuf":
		return ExporterOTLPHTTP, nil
	}
	return "", fmt.Errorf("%s: %q is not supported; use grpc or http/protobuf", name, proto)
}
