package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/backends/grpc"
	"github.com/csi-gateway/csi-gateway/backends/rest"
	"github.com/csi-gateway/csi-gateway/backends/rest/connect"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/redact"
	"github.com/csi-gateway/csi-gateway/tracing"
)

// traceCanary is a secret value sent through traced calls; it must appear in no span.
const traceCanary = "CANARY-trace-55aa"

// traceRig is one span recorder behind two providers: the gateway's, built by
// tracing.NewProvider, and the appliance's, whose spans carry service.name "appliance".
type traceRig struct {
	rec       *tracetest.SpanRecorder
	gateway   trace.TracerProvider
	appliance trace.TracerProvider
	prop      propagation.TextMapPropagator
}

func newTraceRig(t testing.TB, ratio float64) *traceRig {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	gw, shutdown, err := tracing.NewProvider(context.Background(),
		tracing.Config{Exporter: tracing.ExporterNone, SampleRatio: ratio}, tracing.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	appliance := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "appliance"))))
	t.Cleanup(func() {
		shutdown(context.Background())
		appliance.Shutdown(context.Background())
	})
	return &traceRig{rec: rec, gateway: gw, appliance: appliance, prop: tracing.Propagator()}
}

// waitSpans waits until the recorder holds n ended spans (server spans end just after the
// caller has its answer) and returns them.
func (r *traceRig) waitSpans(t *testing.T, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans := r.rec.Ended()
		if len(spans) >= n {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans ended, want %d:\n%s", len(spans), n, describeSpans(spans))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func describeSpans(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s %q span=%s parent=%s %v\n", serviceOf(s), s.SpanKind(), s.Name(),
			s.SpanContext().SpanID(), s.Parent().SpanID(), s.Attributes())
	}
	return b.String()
}

func serviceOf(s sdktrace.ReadOnlySpan) string {
	for _, kv := range s.Resource().Attributes() {
		if kv.Key == "service.name" {
			return kv.Value.AsString()
		}
	}
	return ""
}

// spansOf returns the spans of service with kind, in the order they started.
func spansOf(spans []sdktrace.ReadOnlySpan, service string, kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if serviceOf(s) == service && s.SpanKind() == kind {
			out = append(out, s)
		}
	}
	for i := 1; i < len(out); i++ { // few spans: insertion sort by start time
		for j := i; j > 0 && out[j].StartTime().Before(out[j-1].StartTime()); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func oneSpan(t *testing.T, spans []sdktrace.ReadOnlySpan, service string, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	got := spansOf(spans, service, kind)
	if len(got) != 1 {
		t.Fatalf("%d %s spans of %s, want 1:\n%s", len(got), kind, service, describeSpans(spans))
	}
	return got[0]
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// checkAttrs checks that s has each attribute of want (string or int values).
func checkAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	got := spanAttrs(s)
	for k, w := range want {
		v, ok := got[attribute.Key(k)]
		switch w := w.(type) {
		case string:
			if !ok || v.AsString() != w {
				t.Errorf("span %q (%s): %s = %q, want %q", s.Name(), s.SpanKind(), k, v.String(), w)
			}
		case int:
			if !ok || v.AsInt64() != int64(w) {
				t.Errorf("span %q (%s): %s = %s, want %d", s.Name(), s.SpanKind(), k, v.String(), w)
			}
		}
	}
}

// oldRPCAttrs are rpc.* attributes of the semantic conventions v1.37.0 (otelgrpc emits them
// only under OTEL_SEMCONV_STABILITY_OPT_IN=rpc/old or rpc/dup), which the gateway's spans must
// not mix with v1.43.0's.
var oldRPCAttrs = []attribute.Key{"rpc.system", "rpc.service", "rpc.grpc.status_code"}

// checkNoAttrs checks that s has none of keys.
func checkNoAttrs(t *testing.T, s sdktrace.ReadOnlySpan, keys ...attribute.Key) {
	t.Helper()
	got := spanAttrs(s)
	for _, k := range keys {
		if v, ok := got[k]; ok {
			t.Errorf("span %q (%s) has %s = %s", s.Name(), s.SpanKind(), k, v.String())
		}
	}
}

// checkChild checks that child is a child of parent in the same trace.
func checkChild(t *testing.T, parent, child sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.SpanContext().TraceID() != parent.SpanContext().TraceID() || child.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("%s span %q (trace %s, parent %s) is not a child of %s span %q (trace %s, span %s)",
			child.SpanKind(), child.Name(), child.SpanContext().TraceID(), child.Parent().SpanID(),
			parent.SpanKind(), parent.Name(), parent.SpanContext().TraceID(), parent.SpanContext().SpanID())
	}
}

// traceparentOf is the W3C traceparent header that names s.
func traceparentOf(s sdktrace.ReadOnlySpan) string {
	return fmt.Sprintf("00-%s-%s-%s", s.SpanContext().TraceID(), s.SpanContext().SpanID(), s.SpanContext().TraceFlags())
}

// grpcAppliance is the embedded appliance served on a Unix socket by a grpc server with
// otelgrpc's server handler (when tp is given); it keeps the traceparent of every call.
type grpcAppliance struct {
	sock string

	mu           sync.Mutex
	traceparents []string
}

// startGRPCAppliance serves the appliance; fail, when not nil, may refuse a call first.
func startGRPCAppliance(t testing.TB, tp trace.TracerProvider, prop propagation.TextMapPropagator, fail func(req any) error) *grpcAppliance {
	t.Helper()
	a, err := embedded.Open(embedded.Config{DataDir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ga := &grpcAppliance{sock: filepath.Join(t.TempDir(), "appliance.sock")}
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ga.mu.Lock()
		ga.traceparents = append(ga.traceparents, strings.Join(md.Get("traceparent"), ","))
		ga.mu.Unlock()
		if fail != nil {
			if err := fail(req); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	})}
	if tp != nil {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(prop))))
	}
	srv := grpc.NewServer(opts...)
	a.Register(srv)
	l, err := net.Listen("unix", ga.sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Stop()
		a.Close()
	})
	return ga
}

func (ga *grpcAppliance) seen() []string {
	ga.mu.Lock()
	defer ga.mu.Unlock()
	return append([]string(nil), ga.traceparents...)
}

// newGRPCBackend returns the grpc backend "array" for the appliance, on transport tr (as the
// gateway's configuration gives its grpc backends the listeners' transport), traced when tp
// is given.
func newGRPCBackend(t testing.TB, tr Transport, sock string, tp trace.TracerProvider, prop propagation.TextMapPropagator) backends.Backend {
	t.Helper()
	opts := []grpcbackend.Option{grpcbackend.WithFrames(tr == TransportFrames)}
	if tp != nil {
		opts = append(opts, grpcbackend.WithTracing(backends.ClientTracing{Provider: tp, Propagator: prop}))
	}
	be, err := grpcbackend.New("array", grpcbackend.Config{Target: "unix://" + sock}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// httpAppliance is the embedded appliance behind the connect handler on an httptest server,
// with otelhttp's server handler (when tp is given). It keeps the traceparent header of every
// request, answers the first unavailable requests with 503, and lets answer take any request.
type httpAppliance struct {
	*httptest.Server
	unavailable atomic.Int32 // requests still to answer with 503
	message503  string
	answer      func(w http.ResponseWriter, body string) bool

	mu           sync.Mutex
	traceparents []string
}

func startHTTPAppliance(t testing.TB, tp trace.TracerProvider, prop propagation.TextMapPropagator, setup func(*httpAppliance)) *httpAppliance {
	t.Helper()
	a, err := embedded.Open(embedded.Config{DataDir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	var reg connect.Registrar
	a.Register(&reg)
	inner := connect.NewHandler(reg.Services())
	ha := &httpAppliance{message503: "warming up"}
	if setup != nil {
		setup(ha)
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ha.mu.Lock()
		ha.traceparents = append(ha.traceparents, r.Header.Get("traceparent"))
		ha.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if ha.unavailable.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]string{"code": "unavailable", "message": ha.message503})
			return
		}
		if ha.answer != nil && ha.answer(w, string(body)) {
			return
		}
		inner.ServeHTTP(w, r)
	})
	if tp != nil {
		h = otelhttp.NewHandler(h, "appliance", otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop))
	}
	ha.Server = httptest.NewServer(h)
	t.Cleanup(ha.Close)
	return ha
}

func (ha *httpAppliance) seen() []string {
	ha.mu.Lock()
	defer ha.mu.Unlock()
	return append([]string(nil), ha.traceparents...)
}

// newRESTBackend returns the rest backend "array" for url, with fast retries, traced when tp
// is given. It sends CSI secrets over http:// (the tests' appliances are httptest servers).
func newRESTBackend(t testing.TB, url string, tp trace.TracerProvider, prop propagation.TextMapPropagator) backends.Backend {
	t.Helper()
	var opts []rest.Option
	if tp != nil {
		opts = append(opts, rest.WithTracing(backends.ClientTracing{Provider: tp, Propagator: prop}))
	}
	be, err := rest.New("array", rest.Config{URLs: []string{url}, AllowSecretsOverPlaintextHTTP: true,
		Retry: rest.Retry{MaxAttempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// startTracedGateway serves every method to be (called "array") on transport tr, with a server
// span per call when tp is given.
func startTracedGateway(t *testing.T, tr Transport, be backends.Backend, tp trace.TracerProvider, prop propagation.TextMapPropagator, observers ...CallObserver) *serverHarness {
	t.Helper()
	opts := Options{
		Routes:    []Route{{Methods: []string{"*"}, Backend: "array"}},
		Backends:  map[string]backends.Backend{"array": be},
		Observers: observers,
	}
	if tp != nil {
		opts.StatsHandlers = []stats.Handler{TracingStatsHandler(tp, prop)}
	}
	return startServerHarness(t, tr, opts, ListenerPolicy{}, slog.LevelInfo)
}

// recordObserver keeps the records of the calls.
type recordObserver struct {
	mu      sync.Mutex
	records []CallRecord
}

func (o *recordObserver) Observe(r CallRecord) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.records = append(o.records, r)
}

func (o *recordObserver) all() []CallRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]CallRecord(nil), o.records...)
}

// TestTraceThroughGRPCBackend: gateway server span → backend client span → appliance server
// span, one trace, and a caller's own trace context is continued.
func TestTraceThroughGRPCBackend(t *testing.T) { onEachTransport(t, testTraceThroughGRPCBackend) }

func testTraceThroughGRPCBackend(t *testing.T, tr Transport) {
	rig := newTraceRig(t, 1)
	appl := startGRPCAppliance(t, rig.appliance, rig.prop, nil)
	obs := &recordObserver{}
	ts := startTracedGateway(t, tr, newGRPCBackend(t, tr, appl.sock, rig.gateway, rig.prop), rig.gateway, rig.prop, obs)
	client := csi.NewControllerClient(ts.conn)

	req := serverCreateVolumeRequest("pvc-traced")
	req.Secrets = map[string]string{"password": traceCanary}
	resp, err := client.CreateVolume(serverCallCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	spans := rig.waitSpans(t, 3)
	gw := oneSpan(t, spans, tracing.DefaultServiceName, trace.SpanKindServer)
	cl := oneSpan(t, spans, tracing.DefaultServiceName, trace.SpanKindClient)
	ap := oneSpan(t, spans, "appliance", trace.SpanKindServer)
	if gw.Parent().IsValid() {
		t.Errorf("the gateway's span has parent %s; the caller sent no trace context", gw.Parent().SpanID())
	}
	checkChild(t, gw, cl)
	checkChild(t, cl, ap)
	if !ap.Parent().IsRemote() {
		t.Error("the appliance's span does not have a remote parent")
	}
	for _, s := range []sdktrace.ReadOnlySpan{gw, cl, ap} {
		if s.Name() != "csi.v1.Controller/CreateVolume" {
			t.Errorf("%s span named %q", s.SpanKind(), s.Name())
		}
	}
	checkAttrs(t, gw, map[string]any{"csi.name": "pvc-traced", "csi.backend": "array", "csi.attempt": 1, "rpc.response.status_code": "OK", "rpc.system.name": "grpc", "rpc.method": "csi.v1.Controller/CreateVolume"})
	checkAttrs(t, cl, map[string]any{"csi.backend": "array", "csi.attempt": 1, "rpc.response.status_code": "OK", "rpc.system.name": "grpc", "rpc.method": "csi.v1.Controller/CreateVolume"})
	checkNoAttrs(t, gw, oldRPCAttrs...)
	checkNoAttrs(t, cl, oldRPCAttrs...)
	if gw.Status().Code != otelcodes.Unset || cl.Status().Code != otelcodes.Unset {
		t.Errorf("statuses of a call that succeeded: server %v, client %v", gw.Status(), cl.Status())
	}
	if got := appl.seen(); len(got) != 1 || got[0] != traceparentOf(cl) {
		t.Errorf("the appliance got traceparent %q, want [%s]", got, traceparentOf(cl))
	}
	if recs := obs.all(); len(recs) != 1 || recs[0].TraceID != gw.SpanContext().TraceID().String() {
		t.Errorf("call records %+v, want one with trace ID %s", recs, gw.SpanContext().TraceID())
	}

	// A caller that sends its trace context gets its trace continued; the IDs the request
	// names become attributes.
	rig.rec.Reset()
	callerTrace := "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(serverCallCtx(t), "traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	_, err = client.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: resp.GetVolume().GetVolumeId(), NodeId: "node-1", VolumeCapability: serverMountCap(),
	})
	if err != nil {
		t.Fatal(err)
	}
	spans = rig.waitSpans(t, 3)
	gw = oneSpan(t, spans, tracing.DefaultServiceName, trace.SpanKindServer)
	if gw.SpanContext().TraceID().String() != callerTrace || gw.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("server span in trace %s with parent %s, want the caller's trace %s and span 00f067aa0ba902b7",
			gw.SpanContext().TraceID(), gw.Parent().SpanID(), callerTrace)
	}
	checkAttrs(t, gw, map[string]any{"csi.volume_id": resp.GetVolume().GetVolumeId(), "csi.node_id": "node-1", "csi.attempt": 1})
	checkChild(t, gw, oneSpan(t, spans, tracing.DefaultServiceName, trace.SpanKindClient))
}

// TestTraceThroughRESTBackend: one client span per HTTP attempt, numbered, each with its own
// traceparent, under the gateway's server span.
func TestTraceThroughRESTBackend(t *testing.T) { onEachTransport(t, testTraceThroughRESTBackend) }

func testTraceThroughRESTBackend(t *testing.T, tr Transport) {
	rig := newTraceRig(t, 1)
	appl := startHTTPAppliance(t, rig.appliance, rig.prop, func(ha *httpAppliance) { ha.unavailable.Store(1) })
	obs := &recordObserver{}
	ts := startTracedGateway(t, tr, newRESTBackend(t, appl.URL, rig.gateway, rig.prop), rig.gateway, rig.prop, obs)

	if _, err := csi.NewControllerClient(ts.conn).CreateVolume(serverCallCtx(t), serverCreateVolumeRequest("pvc-rest")); err != nil {
		t.Fatal(err)
	}
	spans := rig.waitSpans(t, 5)
	gw := oneSpan(t, spans, tracing.DefaultServiceName, trace.SpanKindServer)
	checkAttrs(t, gw, map[string]any{"csi.name": "pvc-rest", "csi.backend": "array", "csi.attempt": 2, "rpc.response.status_code": "OK", "rpc.system.name": "grpc", "rpc.method": "csi.v1.Controller/CreateVolume"})
	attempts := spansOf(spans, tracing.DefaultServiceName, trace.SpanKindClient)
	served := spansOf(spans, "appliance", trace.SpanKindServer)
	if len(attempts) != 2 || len(served) != 2 {
		t.Fatalf("%d attempt spans and %d appliance spans, want 2 and 2:\n%s", len(attempts), len(served), describeSpans(spans))
	}
	seen := appl.seen()
	for i, s := range attempts {
		checkChild(t, gw, s)
		checkChild(t, s, served[i])
		if s.Name() != "POST /csi.v1.Controller/CreateVolume" {
			t.Errorf("attempt span named %q", s.Name())
		}
		checkAttrs(t, s, map[string]any{"csi.backend": "array", "csi.attempt": i + 1, "http.response.status_code": []int{503, 200}[i],
			"http.request.method": "POST", "url.full": appl.URL + "/csi.v1.Controller/CreateVolume"})
		if i == 0 {
			checkNoAttrs(t, s, "http.request.resend_count")
		} else {
			checkAttrs(t, s, map[string]any{"http.request.resend_count": i})
		}
		if len(seen) != 2 || seen[i] != traceparentOf(s) {
			t.Errorf("attempt %d: the appliance got traceparents %q, want #%d to be %s", i+1, seen, i+1, traceparentOf(s))
		}
	}
	if attempts[0].Status().Code != otelcodes.Error || attempts[1].Status().Code != otelcodes.Unset {
		t.Errorf("attempt statuses %v, %v; want Error for the 503, Unset for the 200", attempts[0].Status(), attempts[1].Status())
	}
	if recs := obs.all(); len(recs) != 1 || recs[0].TraceID != gw.SpanContext().TraceID().String() || recs[0].Attempts != 2 {
		t.Errorf("call records %+v, want one with trace ID %s and 2 attempts", recs, gw.SpanContext().TraceID())
	}
}

// TestTracesCarryNoSecrets sends canary secrets through both backends, which echo them in
// their error messages, and looks for them in every span the gateway recorded.
func TestTracesCarryNoSecrets(t *testing.T) { onEachTransport(t, testTracesCarryNoSecrets) }

func testTracesCarryNoSecrets(t *testing.T, tr Transport) {
	rig := newTraceRig(t, 1)
	echo := fmt.Sprintf("the password %s is wrong", traceCanary)
	gappl := startGRPCAppliance(t, rig.appliance, rig.prop, func(req any) error {
		if r, ok := req.(*csi.CreateVolumeRequest); ok && r.GetName() == "pvc-echo" {
			return status.Error(codes.Internal, echo)
		}
		return nil
	})
	happl := startHTTPAppliance(t, rig.appliance, rig.prop, func(ha *httpAppliance) {
		ha.message503 = "busy checking " + traceCanary
		ha.answer = func(w http.ResponseWriter, body string) bool {
			if !strings.Contains(body, "pvc-echo") {
				return false
			}
			ha.unavailable.Store(0)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]string{"code": "internal", "message": echo})
			return true
		}
	})
	gateways := map[string]*serverHarness{
		"grpc": startTracedGateway(t, tr, newGRPCBackend(t, tr, gappl.sock, rig.gateway, rig.prop), rig.gateway, rig.prop),
		"rest": startTracedGateway(t, tr, newRESTBackend(t, happl.URL, rig.gateway, rig.prop), rig.gateway, rig.prop),
	}
	for _, kind := range []string{"grpc", "rest"} {
		client := csi.NewControllerClient(gateways[kind].conn)
		ok := serverCreateVolumeRequest("pvc-ok")
		ok.Secrets = map[string]string{"password": traceCanary}
		if _, err := client.CreateVolume(serverCallCtx(t), ok); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		// A name that contains the secret is scrubbed from the span too.
		named := serverCreateVolumeRequest("pvc-" + traceCanary)
		named.Secrets = map[string]string{"password": traceCanary}
		if _, err := client.CreateVolume(serverCallCtx(t), named); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if kind == "rest" {
			happl.unavailable.Store(1) // the failing call is first answered 503, echoing the secret
		}
		bad := serverCreateVolumeRequest("pvc-echo")
		bad.Secrets = map[string]string{"password": traceCanary}
		_, err := client.CreateVolume(serverCallCtx(t), bad)
		if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "the password "+redact.ScrubbedValue+" is wrong") {
			t.Errorf("%s: failing call = %v, want Internal with the password scrubbed", kind, err)
		}
	}
	// grpc: 3 spans per call; rest: 3 per call that succeeds, 5 for the one retried once.
	spans := rig.waitSpans(t, 20)
	var failed, named int
	for _, s := range spans {
		if serviceOf(s) != tracing.DefaultServiceName {
			continue // the test appliance's own spans are not the gateway's business
		}
		for _, text := range spanTexts(s) {
			if strings.Contains(text, traceCanary) {
				t.Errorf("%s span %q carries the secret: %q", s.SpanKind(), s.Name(), text)
			}
		}
		if v, ok := spanAttrs(s)["csi.name"]; ok && strings.HasPrefix(v.AsString(), "pvc-"+redact.ScrubbedValue) {
			named++
		}
		if s.SpanKind() == trace.SpanKindServer && s.Status().Code == otelcodes.Error {
			failed++
			if !strings.Contains(s.Status().Description, "the password "+redact.ScrubbedValue+" is wrong") {
				t.Errorf("server span status %q, want the scrubbed message", s.Status().Description)
			}
			checkAttrs(t, s, map[string]any{"rpc.response.status_code": "INTERNAL"})
		}
	}
	if named != 2 {
		t.Errorf("%d server spans with csi.name pvc-%s, want 2:\n%s", named, redact.ScrubbedValue, describeSpans(spans))
	}
	if failed != 2 {
		t.Errorf("%d failed server spans, want 2:\n%s", failed, describeSpans(spans))
	}
}

// spanTexts is every piece of text a span carries: name, attributes, events, links, status.
func spanTexts(s sdktrace.ReadOnlySpan) []string {
	out := []string{s.Name(), s.Status().Description}
	kvs := func(attrs []attribute.KeyValue) {
		for _, kv := range attrs {
			out = append(out, string(kv.Key), kv.Value.String())
		}
	}
	kvs(s.Attributes())
	for _, e := range s.Events() {
		out = append(out, e.Name)
		kvs(e.Attributes)
	}
	for _, l := range s.Links() {
		kvs(l.Attributes)
	}
	return out
}

// TestSamplingZeroStillPropagates: at ratio 0 no span is recorded, but the backends still get
// a traceparent (unsampled) naming the trace the call record names.
func TestSamplingZeroStillPropagates(t *testing.T) {
	onEachTransport(t, testSamplingZeroStillPropagates)
}

func testSamplingZeroStillPropagates(t *testing.T, tr Transport) {
	rig := newTraceRig(t, 0)
	gappl := startGRPCAppliance(t, rig.appliance, rig.prop, nil)
	happl := startHTTPAppliance(t, rig.appliance, rig.prop, nil)
	for name, be := range map[string]backends.Backend{
		"grpc": newGRPCBackend(t, tr, gappl.sock, rig.gateway, rig.prop),
		"rest": newRESTBackend(t, happl.URL, rig.gateway, rig.prop),
	} {
		obs := &recordObserver{}
		ts := startTracedGateway(t, tr, be, rig.gateway, rig.prop, obs)
		if _, err := csi.NewControllerClient(ts.conn).CreateVolume(serverCallCtx(t), serverCreateVolumeRequest("pvc-"+name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seen := gappl.seen()
		if name == "rest" {
			seen = happl.seen()
		}
		recs := obs.all()
		if len(recs) != 1 || len(recs[0].TraceID) != 32 {
			t.Fatalf("%s: call records %+v, want one with a trace ID", name, recs)
		}
		want := "00-" + recs[0].TraceID + "-"
		if len(seen) != 1 || !strings.HasPrefix(seen[0], want) || !strings.HasSuffix(seen[0], "-00") {
			t.Errorf("%s: the appliance got traceparent %q, want %s<span>-00", name, seen, want)
		}
	}
	time.Sleep(50 * time.Millisecond) // server spans end just after the answer
	if spans := rig.rec.Ended(); len(spans) != 0 {
		t.Errorf("%d spans recorded at ratio 0:\n%s", len(spans), describeSpans(spans))
	}
}

// createThroughBothBackends makes one CreateVolume with ctx through a gateway in front of the
// gRPC and then the REST appliance, both backends and the gateway with tp and prop (nil: no
// tracing at all), on transport tr, and returns each path's call records and the traceparents
// its appliance got.
func createThroughBothBackends(t *testing.T, tr Transport, ctx context.Context, tp trace.TracerProvider, prop propagation.TextMapPropagator) (records map[string][]CallRecord, seen map[string][]string) {
	t.Helper()
	gappl := startGRPCAppliance(t, nil, nil, nil)
	happl := startHTTPAppliance(t, nil, nil, nil)
	records = map[string][]CallRecord{}
	for name, be := range map[string]backends.Backend{
		"grpc": newGRPCBackend(t, tr, gappl.sock, tp, prop),
		"rest": newRESTBackend(t, happl.URL, tp, prop),
	} {
		obs := &recordObserver{}
		ts := startTracedGateway(t, tr, be, tp, prop, obs)
		if _, err := csi.NewControllerClient(ts.conn).CreateVolume(ctx, serverCreateVolumeRequest("pvc-"+name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		records[name] = obs.all()
	}
	return records, map[string][]string{"grpc": gappl.seen(), "rest": happl.seen()}
}

// TestTracingOff: without a provider the gateway sends no trace context of its own and the
// call record has no trace ID.
func TestTracingOff(t *testing.T) { onEachTransport(t, testTracingOff) }

func testTracingOff(t *testing.T, tr Transport) {
	records, seen := createThroughBothBackends(t, tr, serverCallCtx(t), nil, nil)
	for name, recs := range records {
		if len(recs) != 1 || recs[0].TraceID != "" {
			t.Errorf("%s: call records %+v, want one without a trace ID", name, recs)
		}
	}
	for name, seen := range seen {
		if len(seen) != 1 || seen[0] != "" {
			t.Errorf("%s: the appliance got traceparents %q, want none", name, seen)
		}
	}
}

// TestTracingOffCarriesCallersTrace: with tracing off (the no-op provider, as `serve` has it)
// the gateway makes no span but still takes the caller's trace context from its metadata: the
// call record has the caller's trace ID, and both backends pass it on to the appliance.
func TestTracingOffCarriesCallersTrace(t *testing.T) {
	onEachTransport(t, testTracingOffCarriesCallersTrace)
}

func testTracingOffCarriesCallersTrace(t *testing.T, tr Transport) {
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(serverCallCtx(t),
		"traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01", "baggage", "tenant=blue")
	records, seen := createThroughBothBackends(t, tr, ctx, tracenoop.NewTracerProvider(), tracing.Propagator())
	for name, recs := range records {
		if len(recs) != 1 || recs[0].TraceID != callerTrace {
			t.Errorf("%s: call records %+v, want one with the caller's trace ID %s", name, recs, callerTrace)
		}
	}
	for name, seen := range seen {
		if len(seen) != 1 || !strings.HasPrefix(seen[0], "00-"+callerTrace+"-") {
			t.Errorf("%s: the appliance got traceparents %q, want the caller's trace %s", name, seen, callerTrace)
		}
	}
}

// TestApplianceLogsTheGatewayTraceID runs the real appliance binary behind both backends and
// finds the trace ID of each call's gateway span on the appliance's log line for that call.
func TestApplianceLogsTheGatewayTraceID(t *testing.T) {
	onEachTransport(t, testApplianceLogsTheGatewayTraceID)
}

func testApplianceLogsTheGatewayTraceID(t *testing.T, tr Transport) {
	if testing.Short() {
		t.Skip("builds and runs the csi-gateway binary")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "appliance.sock")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := l.Addr().String()
	l.Close()
	p := testutil.Start(t, "appliance", "--data", filepath.Join(dir, "data"), "--endpoint", "unix://"+sock,
		"--http", httpAddr, "--log-level", "info")
	waitFor(t, func() bool { return strings.Contains(p.Output(), `"msg":"appliance ready"`) }, p.Output)

	rig := newTraceRig(t, 1)
	ts := startServerHarness(t, tr, Options{
		Routes: []Route{
			{Methods: []string{"/csi.v1.Controller/CreateVolume"}, Backend: "rest"},
			{Methods: []string{"*"}, Backend: "grpc"},
		},
		Backends: map[string]backends.Backend{
			"rest": newRESTBackend(t, "http://"+httpAddr, rig.gateway, rig.prop),
			"grpc": newGRPCBackend(t, tr, sock, rig.gateway, rig.prop),
		},
		StatsHandlers: []stats.Handler{TracingStatsHandler(rig.gateway, rig.prop)},
	}, ListenerPolicy{}, slog.LevelInfo)
	client := csi.NewControllerClient(ts.conn)
	if _, err := client.CreateVolume(serverCallCtx(t), serverCreateVolumeRequest("pvc-logged")); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{}); err != nil {
		t.Fatal(err)
	}
	spans := spansOf(rig.waitSpans(t, 4), tracing.DefaultServiceName, trace.SpanKindServer)
	if len(spans) != 2 {
		t.Fatalf("%d server spans, want 2", len(spans))
	}
	for _, s := range spans {
		method := "/" + s.Name()
		want := s.SpanContext().TraceID().String()
		var logged []string
		waitFor(t, func() bool {
			logged = applianceTraceIDs(p.Output(), method)
			return len(logged) > 0
		}, p.Output)
		if len(logged) != 1 || logged[0] != want {
			t.Errorf("the appliance logged %s with trace IDs %q, want [%s]", method, logged, want)
		}
	}
}

// applianceTraceIDs returns the trace_id of each "call" line of the appliance's log for method.
func applianceTraceIDs(out, method string) []string {
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		var rec struct {
			Msg, Method string
			TraceID     string `json:"trace_id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "call" && rec.Method == method {
			ids = append(ids, rec.TraceID)
		}
	}
	return ids
}

func waitFor(t *testing.T, cond func() bool, output func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out; the appliance wrote:\n%s", output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
