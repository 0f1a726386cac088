package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// otlpReceiver keeps the requests an OTLP receiver (gRPC or HTTP) was sent.
type otlpReceiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	requests []*coltrace.ExportTraceServiceRequest
	paths    []string // the HTTP request paths
}

func (r *otlpReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP/HTTP with protobuf bodies.
func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var m coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &m)
	}
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("not an OTLP protobuf request (%s): %v", req.Header.Get("Content-Type"), err), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	r.mu.Unlock()
	resp, _ := r.Export(req.Context(), &m)
	b, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// receivedSpan is one span a receiver got, with its resource's attributes.
type receivedSpan struct {
	span     *tracepb.Span
	resource map[string]string
}

func (r *otlpReceiver) spans() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, req := range r.requests {
		for _, rs := range req.GetResourceSpans() {
			res := attrStrings(rs.GetResource().GetAttributes())
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, receivedSpan{s, res})
				}
			}
		}
	}
	return out
}

// attrStrings renders OTLP attributes as strings (an int as its decimal form).
func attrStrings(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.IntValue)
		default:
			m[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return m
}

// environWithout is the test's environment without the variables that would configure the
// gateway (OTEL_*, CSIGW_*, CSI_ENDPOINT), plus extra.
func environWithout(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "CSIGW_") && !strings.HasPrefix(kv, "CSI_ENDPOINT=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestOTLPEndpointAloneExports: a gateway whose configuration says nothing about tracing, with
// only OTEL_EXPORTER_OTLP_ENDPOINT set (what the OpenTelemetry Operator injects), exports its
// spans there, over OTLP/HTTP (the specification's default protocol), and over gRPC with
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc; the spans carry the semantic conventions v1.43.0 rpc.*
// attributes and none of the older ones.
func TestOTLPEndpointAloneExports(t *testing.T) {
	t.Run("http/protobuf", func(t *testing.T) {
		rcv := &otlpReceiver{}
		srv := httptest.NewServer(rcv)
		defer srv.Close()
		spans := exportFromGateway(t, rcv, "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL)
		checkGatewaySpan(t, spans)
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		for _, p := range rcv.paths {
			if p != "/v1/traces" {
				t.Errorf("the exporter posted to %s, want /v1/traces (added to OTEL_EXPORTER_OTLP_ENDPOINT)", p)
			}
		}
	})
	t.Run("grpc", func(t *testing.T) {
		rcv := &otlpReceiver{}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		coltrace.RegisterTraceServiceServer(srv, rcv)
		go srv.Serve(l)
		defer srv.Stop()
		spans := exportFromGateway(t, rcv, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+l.Addr().String(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
		checkGatewaySpan(t, spans)
	})
}

// exportFromGateway starts the real gateway (embedded backend, no tracing configuration) with
// env, makes one GetPluginInfo call, stops the gateway with SIGTERM (which flushes its spans)
// and returns what rcv received.
func exportFromGateway(t *testing.T, rcv *otlpReceiver, env ...string) []receivedSpan {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "gw.sock")
	config := writeFile(t, filepath.Join(dir, "gateway.yaml"), fmt.Sprintf(
		"listeners:\n  - endpoint: unix://%s\nbackends:\n  local: {type: embedded, dataDir: %q}\nroutes:\n  - {methods: [\"*\"], backend: local}\n",
		sock, filepath.Join(dir, "data")))
	p := testutil.StartEnv(t, environWithout(env...), "serve", "--config", config)
	conn := testutil.Dial(t, "unix://"+sock) // its Probe calls make spans too
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}); err != nil {
		t.Fatalf("GetPluginInfo: %v\n%s", err, p.Output())
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatalf("the gateway did not stop cleanly: %v\n%s", err, p.Output())
	}
	if strings.Contains(p.Output(), `"msg":"tracing"`) {
		t.Errorf("the gateway logged a tracing error:\n%s", p.Output())
	}
	return rcv.spans()
}

// checkGatewaySpan checks the server span of the GetPluginInfo call among spans.
func checkGatewaySpan(t *testing.T, spans []receivedSpan) {
	t.Helper()
	for _, s := range spans {
		if s.span.GetName() != "csi.v1.Identity/GetPluginInfo" || s.span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			continue
		}
		if got := s.resource["service.name"]; got != "csi-gateway" {
			t.Errorf("service.name = %q, want csi-gateway", got)
		}
		attrs := attrStrings(s.span.GetAttributes())
		for k, want := range map[string]string{"rpc.system.name": "grpc", "rpc.method": "csi.v1.Identity/GetPluginInfo", "rpc.response.status_code": "OK", "csi.backend": "local"} {
			if attrs[k] != want {
				t.Errorf("server span: %s = %q, want %q (attributes %v)", k, attrs[k], want, attrs)
			}
		}
		for _, old := range []string{"rpc.system", "rpc.service", "rpc.grpc.status_code"} {
			if v, ok := attrs[old]; ok {
				t.Errorf("server span has the old %s = %q next to the current conventions", old, v)
			}
		}
		return
	}
	names := make([]string, 0, len(spans))
	for _, s := range spans {
		names = append(names, s.span.GetName())
	}
	t.Errorf("no server span csi.v1.Identity/GetPluginInfo arrived; the receiver got %q", names)
}
