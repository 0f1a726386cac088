package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// cleanEnv clears the OTEL_* variables NewProvider and the SDK read, so the machine's
// environment cannot change a test's outcome.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE",
		"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_TRACES_SAMPLER",
		"OTEL_TRACES_SAMPLER_ARG", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	} {
		t.Setenv(k, "")
	}
}

// quietOtel routes otel's background errors (failed exports) to the test log for the test.
func quietOtel(t *testing.T) {
	t.Helper()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { t.Logf("otel: %v", err) }))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
}

func mustProvider(t *testing.T, cfg Config, opts ...Option) (trace.TracerProvider, func(context.Context) error) {
	t.Helper()
	tp, shutdown, err := NewProvider(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("NewProvider(%+v) = %v", cfg, err)
	}
	return tp, shutdown
}

// stdoutSpan is the part of the stdout exporter's JSON that the tests read.
type stdoutSpan struct {
	Name        string
	SpanContext struct{ TraceID string }
	Resource    []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s stdoutSpan) resource(key string) any {
	for _, kv := range s.Resource {
		if kv.Key == key {
			return kv.Value.Value
		}
	}
	return nil
}

func readStdoutSpans(t *testing.T, out string) []stdoutSpan {
	t.Helper()
	var spans []stdoutSpan
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var s stdoutSpan
		if err := dec.Decode(&s); err == io.EOF {
			return spans
		} else if err != nil {
			t.Fatalf("stdout exporter output is not JSON: %v\n%s", err, out)
		}
		spans = append(spans, s)
	}
}

func TestStdoutExporterWritesSpansAtShutdown(t *testing.T) {
	cleanEnv(t)
	var buf testutil.SyncBuffer
	tp, shutdown := mustProvider(t, Config{Exporter: ExporterStdout, SampleRatio: 1, ServiceVersion: "v9.8.7"}, WithWriter(&buf))
	if _, ok := tp.(*sdktrace.TracerProvider); !ok {
		t.Fatalf("provider is %T, want the SDK's", tp)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "stdout-span")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := readStdoutSpans(t, buf.String())
	if len(spans) != 1 || spans[0].Name != "stdout-span" {
		t.Fatalf("stdout exporter wrote %+v, want the one span", spans)
	}
	s := spans[0]
	if s.SpanContext.TraceID != span.SpanContext().TraceID().String() {
		t.Errorf("trace ID %q, want %q", s.SpanContext.TraceID, span.SpanContext().TraceID())
	}
	for key, want := range map[string]any{"service.name": DefaultServiceName, "service.version": "v9.8.7"} {
		if got := s.resource(key); got != want {
			t.Errorf("resource %s = %v, want %v", key, got, want)
		}
	}
	if id, _ := s.resource("service.instance.id").(string); len(id) != 36 {
		t.Errorf("service.instance.id = %q, want a UUID", id)
	}
}

func TestNoneIsTheNoopProviderAndStillPropagates(t *testing.T) {
	cleanEnv(t)
	for _, exporter := range []string{ExporterNone, ""} {
		tp, shutdown := mustProvider(t, Config{Exporter: exporter, SampleRatio: 1})
		if _, ok := tp.(noop.TracerProvider); !ok {
			t.Fatalf("Exporter %q: provider is %T, want noop.TracerProvider", exporter, tp)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Errorf("shutdown = %v", err)
		}
		// A caller's trace context goes through the gateway's spans to the backend unchanged.
		in := propagation.MapCarrier{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
		ctx := Propagator().Extract(context.Background(), in)
		ctx, span := tp.Tracer("test").Start(ctx, "server")
		out := propagation.MapCarrier{}
		Propagator().Inject(ctx, out)
		span.End()
		if out["traceparent"] != in["traceparent"] {
			t.Errorf("Exporter %q: injected traceparent %q, want the caller's %q", exporter, out["traceparent"], in["traceparent"])
		}
	}
}

func TestSDKDisabledIsNoop(t *testing.T) {
	cleanEnv(t)
	t.Setenv("OTEL_SDK_DISABLED", "TRUE")
	tp, _ := mustProvider(t, Config{Exporter: ExporterStdout, SampleRatio: 1}, WithWriter(io.Discard))
	if _, ok := tp.(noop.TracerProvider); !ok {
		t.Fatalf("provider is %T, want noop.TracerProvider", tp)
	}
}

func TestSampling(t *testing.T) {
	cleanEnv(t)
	sampledParent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	unsampledParent := sampledParent.WithTraceFlags(0)
	for _, tc := range []struct {
		name   string
		ratio  float64
		env    string
		parent trace.SpanContext
		want   int
	}{
		{"ratio 1", 1, "", trace.SpanContext{}, 1},
		{"ratio 0", 0, "", trace.SpanContext{}, 0},
		{"ratio 0 follows a sampled caller", 0, "", sampledParent, 1},
		{"ratio 1 follows an unsampled caller", 1, "", unsampledParent, 0},
		{"negative: the environment decides", -1, "always_off", trace.SpanContext{}, 0},
		{"negative: default records all", -1, "", trace.SpanContext{}, 1},
		{"config beats the environment", 1, "always_off", trace.SpanContext{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_SAMPLER", tc.env)
			rec := tracetest.NewSpanRecorder()
			tp, shutdown := mustProvider(t, Config{Exporter: ExporterNone, SampleRatio: tc.ratio}, WithSpanProcessor(rec))
			ctx := context.Background()
			if tc.parent.IsValid() {
				ctx = trace.ContextWithRemoteSpanContext(ctx, tc.parent)
			}
			_, span := tp.Tracer("test").Start(ctx, "s")
			if !span.SpanContext().IsValid() {
				t.Error("span has no valid span context; unsampled spans must still propagate")
			}
			span.End()
			shutdown(context.Background())
			if got := len(rec.Ended()); got != tc.want {
				t.Errorf("recorded %d spans, want %d", got, tc.want)
			}
		})
	}
}

func TestServiceNamePrecedence(t *testing.T) {
	for _, tc := range []struct {
		name, env, cfg, want string
	}{
		{"default", "", "", DefaultServiceName},
		{"environment over default", "from-env", "", "from-env"},
		{"config over environment", "from-env", "from-config", "from-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t)
			t.Setenv("OTEL_SERVICE_NAME", tc.env)
			rec := tracetest.NewSpanRecorder()
			tp, _ := mustProvider(t, Config{SampleRatio: 1, ServiceName: tc.cfg}, WithSpanProcessor(rec))
			_, span := tp.Tracer("test").Start(context.Background(), "s")
			span.End()
			got := ""
			for _, kv := range rec.Ended()[0].Resource().Attributes() {
				if kv.Key == "service.name" {
					got = kv.Value.AsString()
				}
			}
			if got != tc.want {
				t.Errorf("service.name = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExporterResolution: the configuration's exporter, else OTEL_TRACES_EXPORTER, else otlp
// when an endpoint is given, else none; both accept the same names; otlp's protocol comes
// from the protocol variables, else gRPC from the configuration and http/protobuf from the
// environment.
func TestExporterResolution(t *testing.T) {
	type env map[string]string
	for _, tc := range []struct {
		name          string
		cfg           Config
		env           env
		want, wantErr string
	}{
		{"nothing: none, not the specification's otlp to localhost", Config{}, nil, ExporterNone, ""},
		{"OTEL_EXPORTER_OTLP_ENDPOINT alone: otlp over http/protobuf", Config{}, env{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ExporterOTLPHTTP, ""},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT alone", Config{}, env{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, ExporterOTLPHTTP, ""},
		{"an endpoint variable and protocol grpc", Config{}, env{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ExporterOTLP, ""},
		{"tracing.endpoint alone: otlp over gRPC, as the file's otlp", Config{Endpoint: "127.0.0.1:4317"}, nil, ExporterOTLP, ""},
		{"OTEL_TRACES_EXPORTER=none beats an endpoint", Config{}, env{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ExporterNone, ""},
		{"tracing.exporter none beats an endpoint", Config{Exporter: ExporterNone, Endpoint: "127.0.0.1:4317"}, nil, ExporterNone, ""},
		{"OTEL_TRACES_EXPORTER=none", Config{}, env{"OTEL_TRACES_EXPORTER": "none"}, ExporterNone, ""},
		{"OTEL_TRACES_EXPORTER=console", Config{}, env{"OTEL_TRACES_EXPORTER": "console"}, ExporterStdout, ""},
		{"OTEL_TRACES_EXPORTER=stdout", Config{}, env{"OTEL_TRACES_EXPORTER": "stdout"}, ExporterStdout, ""},
		{"OTEL_TRACES_EXPORTER=otlphttp", Config{}, env{"OTEL_TRACES_EXPORTER": "otlphttp"}, ExporterOTLPHTTP, ""},
		{"OTEL_TRACES_EXPORTER=otlp: http/protobuf", Config{}, env{"OTEL_TRACES_EXPORTER": "otlp"}, ExporterOTLPHTTP, ""},
		{"OTEL_TRACES_EXPORTER=otlp, protocol grpc", Config{}, env{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ExporterOTLP, ""},
		{"the traces protocol beats the general one", Config{}, env{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, ExporterOTLPHTTP, ""},
		{"tracing.exporter console", Config{Exporter: "console"}, nil, ExporterStdout, ""},
		{"tracing.exporter stdout", Config{Exporter: "stdout"}, nil, ExporterStdout, ""},
		{"tracing.exporter otlp: gRPC", Config{Exporter: "otlp"}, nil, ExporterOTLP, ""},
		{"tracing.exporter otlp, protocol http/protobuf", Config{Exporter: "otlp"}, env{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, ExporterOTLPHTTP, ""},
		{"tracing.exporter beats OTEL_TRACES_EXPORTER", Config{Exporter: ExporterNone}, env{"OTEL_TRACES_EXPORTER": "console"}, ExporterNone, ""},
		{"protocol http/json", Config{}, env{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "",
			`OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" is not supported; use grpc or http/protobuf`},
		{"traces protocol http/json", Config{}, env{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "",
			`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json" is not supported; use grpc or http/protobuf`},
		{"OTEL_TRACES_EXPORTER=zipkin", Config{}, env{"OTEL_TRACES_EXPORTER": "zipkin"}, "",
			`OTEL_TRACES_EXPORTER: "zipkin" is not supported; use otlp, console, none, stdout or otlphttp (or set tracing.exporter)`},
		{"tracing.exporter jaeger", Config{Exporter: "jaeger"}, nil, "", `tracing.exporter: "jaeger" is not none, otlp, otlphttp, stdout or console`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, err := exporterKind(tc.cfg)
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Errorf("exporterKind(%+v) with %v = %q, %v; want %q, %q", tc.cfg, tc.env, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	cleanEnv(t)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Exporter: "jaeger"}, `tracing.exporter: "jaeger" is not none, otlp, otlphttp, stdout or console`},
		{Config{Exporter: ExporterStdout, SampleRatio: 1.5}, "tracing.sampleRatio: 1.5 is not between 0 and 1"},
		{Config{Exporter: ExporterOTLP, Endpoint: "collector"}, `tracing.endpoint: "collector" is neither host:port nor a URL (http://host:port or https://host:port)`},
		{Config{Exporter: ExporterOTLP, Endpoint: "ftp://collector:21"}, `tracing.endpoint: scheme "ftp" is not supported; use http:// or https://`},
		{Config{Exporter: ExporterOTLPHTTP, Endpoint: "https://user:hunter2@collector:4318"}, "tracing.endpoint: https://collector:4318: credentials do not belong in the URL; put them in OTEL_EXPORTER_OTLP_HEADERS"},
		{Config{Exporter: ExporterOTLPHTTP, Endpoint: "https://collector:4318", Insecure: true}, `tracing.insecure: true contradicts the https:// of tracing.endpoint "https://collector:4318"; use http:// for plaintext`},
	} {
		_, _, err := NewProvider(context.Background(), tc.cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("NewProvider(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error repeats a credential: %v", err)
		}
	}
}

// freeAddr returns a loopback address where nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestOTLPWithoutCollectorShutsDownInTime: a collector that is down fails neither NewProvider
// nor the calls; shutdown gives up when its context ends.
func TestOTLPWithoutCollectorShutsDownInTime(t *testing.T) {
	cleanEnv(t)
	quietOtel(t)
	addr := freeAddr(t)
	for _, cfg := range []Config{
		{Exporter: ExporterOTLP, Endpoint: addr, Insecure: true, SampleRatio: 1},
		{Exporter: ExporterOTLP, Endpoint: "http://" + addr, SampleRatio: 1},
		{Exporter: ExporterOTLPHTTP, Endpoint: "http://" + addr, SampleRatio: 1},
		{Exporter: ExporterOTLPHTTP, Endpoint: addr, Insecure: true, SampleRatio: 1},
	} {
		start := time.Now()
		tp, shutdown := mustProvider(t, cfg)
		if d := time.Since(start); d > time.Second {
			t.Errorf("%+v: NewProvider took %v; it must not connect", cfg, d)
		}
		_, span := tp.Tracer("test").Start(context.Background(), "lost")
		span.End()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		start = time.Now()
		err := shutdown(ctx)
		cancel()
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%+v: shutdown took %v with a 500ms deadline", cfg, d)
		}
		// Whether the lost spans are reported here or through otel's error handler depends
		// on how the export failed (the gRPC exporter retries until the deadline; the HTTP
		// one gives up on a refused connection at once): only the bound is promised.
		t.Logf("%s %s: shutdown returned %v after %v", cfg.Exporter, cfg.Endpoint, err, time.Since(start).Round(time.Millisecond))
	}
}

// collector is an OTLP/gRPC trace collector that keeps the span names it receives.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func TestOTLPGRPCDeliversToCollector(t *testing.T) {
	cleanEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, col)
	go srv.Serve(l)
	defer srv.Stop()

	tp, shutdown := mustProvider(t, Config{Exporter: ExporterOTLP, Endpoint: l.Addr().String(), Insecure: true, SampleRatio: 1})
	_, span := tp.Tracer("test").Start(context.Background(), "to-collector")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.names) != 1 || col.names[0] != "to-collector" {
		t.Errorf("collector received %q, want [to-collector]", col.names)
	}
}

func TestOTLPHTTPBaseURLGetsTracesPath(t *testing.T) {
	cleanEnv(t)
	type request struct {
		path, contentType string
		spans             int
	}
	got := make(chan request, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		n := -1
		if proto.Unmarshal(body, &req) == nil {
			n = 0
			for _, rs := range req.GetResourceSpans() {
				for _, ss := range rs.GetScopeSpans() {
					n += len(ss.GetSpans())
				}
			}
		}
		got <- request{r.URL.Path, r.Header.Get("Content-Type"), n}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(nil)
	}))
	defer srv.Close()
	for _, tc := range []struct{ endpoint, wantPath string }{
		{srv.URL, "/v1/traces"},
		{srv.URL + "/", "/v1/traces"},
		{srv.URL + "/custom/traces", "/custom/traces"},
	} {
		tp, shutdown := mustProvider(t, Config{Exporter: ExporterOTLPHTTP, Endpoint: tc.endpoint, SampleRatio: 1})
		_, span := tp.Tracer("test").Start(context.Background(), "to-collector")
		span.End()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := shutdown(ctx); err != nil {
			t.Fatalf("%s: %v", tc.endpoint, err)
		}
		cancel()
		select {
		case r := <-got:
			if r.path != tc.wantPath || r.contentType != "application/x-protobuf" || r.spans != 1 {
				t.Errorf("endpoint %s: collector got %+v, want path %s, protobuf, 1 span", tc.endpoint, r, tc.wantPath)
			}
		default:
			t.Errorf("endpoint %s: the collector received nothing", tc.endpoint)
		}
	}
}

// keepExporter keeps the names of the spans it exports, also after Shutdown.
type keepExporter struct {
	mu       sync.Mutex
	names    []string
	shutdown bool
}

func (e *keepExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		e.names = append(e.names, s.Name())
	}
	return nil
}

func (e *keepExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown = true
	return nil
}

func TestWithExporterReplacesTheConfiguredOne(t *testing.T) {
	cleanEnv(t)
	exp := &keepExporter{}
	tp, shutdown := mustProvider(t, Config{Exporter: ExporterNone, SampleRatio: 1}, WithExporter(exp))
	_, span := tp.Tracer("test").Start(context.Background(), "injected")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	if len(exp.names) != 1 || exp.names[0] != "injected" || !exp.shutdown {
		t.Errorf("exporter got %q (shut down: %v), want [injected] and shut down", exp.names, exp.shutdown)
	}
}

func TestPropagatorFields(t *testing.T) {
	fields := Propagator().Fields()
	slices.Sort(fields)
	if got := strings.Join(fields, ","); got != "baggage,traceparent,tracestate" {
		t.Errorf("Propagator().Fields() = %s", got)
	}
}

func TestErrorHandlerLogs(t *testing.T) {
	var buf testutil.SyncBuffer
	h := ErrorHandler(slog.New(slog.NewJSONHandler(&buf, nil)))
	h.Handle(errors.New("traces export: connection refused"))
	if !strings.Contains(buf.String(), `"msg":"tracing","error":"traces export: connection refused"`) {
		t.Errorf("log = %s", buf.String())
	}
}
