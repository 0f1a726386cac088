package rest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/csi-gateway/csi-gateway/backends"
)

// tracedBackend returns a backend for urls whose attempt spans go to a recorder, and a tracer
// to make the parent spans a gateway would.
func tracedBackend(t *testing.T, urls ...string) (*Backend, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	cfg := Config{URLs: urls, AllowSecretsOverPlaintextHTTP: true, Retry: Retry{MaxAttempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}}
	b, err := New(testName, cfg, WithTracing(backends.ClientTracing{Provider: tp, Propagator: propagation.TraceContext{}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, rec, tp.Tracer("gateway")
}

// TestAttemptSpans: a call that fails over from a URL where nothing listens to one that
// answers has two attempt spans, numbered, under the caller's span; the appliance gets the
// traceparent of the attempt that reached it.
func TestAttemptSpans(t *testing.T) {
	srv := newServer(t, reply(http.StatusOK, "application/json", created))
	b, rec, tracer := tracedBackend(t, refusedURL(t), srv.URL)
	ctx, _ := callContext(t)
	ctx, parent := tracer.Start(ctx, "server")
	if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	parent.End()

	var attempts []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	for i, s := range attempts {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if s.Name() != "POST "+createPath || s.Parent().SpanID() != parent.SpanContext().SpanID() ||
			attrs["csi.backend"] != testName || attrs["csi.attempt"] != fmt.Sprint(i+1) {
			t.Errorf("attempt %d: span %q under %s with %v; want POST %s under %s, csi.backend %s, csi.attempt %d",
				i+1, s.Name(), s.Parent().SpanID(), attrs, createPath, parent.SpanContext().SpanID(), testName, i+1)
		}
		for _, text := range append([]string{s.Status().Description}, attrs["url.full"]) {
			if strings.Contains(text, "s3cr3t") {
				t.Errorf("attempt %d span carries the secret: %q", i+1, text)
			}
		}
	}
	if st := attempts[0].Status(); st.Code != otelcodes.Error || !strings.Contains(st.Description, "connection refused") {
		t.Errorf("refused attempt's status %+v, want Error saying connection refused", st)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	want := fmt.Sprintf("00-%s-%s-01", attempts[1].SpanContext().TraceID(), attempts[1].SpanContext().SpanID())
	if len(srv.headers) != 1 || srv.headers[0].Get("traceparent") != want {
		t.Errorf("the appliance got traceparent %q, want %s", srv.headers[0].Get("traceparent"), want)
	}
}

func TestNoAttemptSpanOutsideATrace(t *testing.T) {
	srv := newServer(t, reply(http.StatusOK, "application/json", `{"ready":true}`))
	b, rec, _ := tracedBackend(t, srv.URL)
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans for Ready, want 0", n)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if tp := srv.headers[0].Get("traceparent"); tp != "" {
		t.Errorf("Ready sent traceparent %q", tp)
	}
}

// idleCounter is a transport that counts CloseIdleConnections.
type idleCounter struct {
	http.RoundTripper
	closed atomic.Int32
}

func (c *idleCounter) CloseIdleConnections() { c.closed.Add(1) }

func TestTracedBackendCloseClosesIdleConnections(t *testing.T) {
	base := &idleCounter{RoundTripper: http.DefaultTransport}
	rec := tracetest.NewSpanRecorder()
	b, err := New(testName, Config{URLs: []string{"http://127.0.0.1:1"}},
		WithHTTPClient(&http.Client{Transport: base}), WithTracing(backends.ClientTracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}))
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if base.closed.Load() != 1 {
		t.Errorf("Close closed the idle connections of the transport %d times, want 1", base.closed.Load())
	}
}
