package grpcbackend

import (
	"context"
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/csi-gateway/csi-gateway/backends"
)

// tracedBackend returns a backend for d whose spans go to a recorder, and a tracer to make the
// parent spans a gateway would.
func tracedBackend(t *testing.T, d *testDriver) (*Backend, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	prop := propagation.TraceContext{}
	return newBackend(t, d.target, WithTracing(backends.ClientTracing{Provider: tp, Propagator: prop})), rec, tp.Tracer("gateway")
}

func TestClientSpanPerCall(t *testing.T) {
	d := startDriver(t)
	b, rec, tracer := tracedBackend(t, d)

	ctx, _ := backends.WithCallInfo(context.Background())
	// The caller's own trace context, forwarded as metadata, is replaced by the span's.
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("traceparent", "00-11111111111111111111111111111111-2222222222222222-01"))
	ctx, parent := tracer.Start(ctx, "server")
	req := mustMarshal(t, &csi.CreateVolumeRequest{Name: "code-13"})
	if _, err := b.Unary(ctx, createVolume, req); err == nil {
		t.Fatal("Unary succeeded; the driver fails code-13")
	}
	parent.End()

	var client sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			client = s
		}
	}
	if client == nil {
		t.Fatalf("no client span among %d spans", len(rec.Ended()))
	}
	if client.Parent().SpanID() != parent.SpanContext().SpanID() || client.Name() != "csi.v1.Controller/CreateVolume" {
		t.Errorf("client span %q with parent %s, want csi.v1.Controller/CreateVolume under %s", client.Name(), client.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range client.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["csi.backend"] != "drv" || attrs["csi.attempt"] != "1" {
		t.Errorf("client span attributes %v, want csi.backend drv and csi.attempt 1", attrs)
	}
	// The driver's message ("driver says Internal") never reaches the span.
	if st := client.Status(); st.Code != otelcodes.Error || st.Description != "Internal" {
		t.Errorf("client span status %+v, want Error \"Internal\"", st)
	}
	md, _, _ := d.seen()
	want := fmt.Sprintf("00-%s-%s-01", client.SpanContext().TraceID(), client.SpanContext().SpanID())
	if got := md.Get("traceparent"); len(got) != 1 || got[0] != want {
		t.Errorf("the driver got traceparent %q, want [%s]", got, want)
	}
}

func TestNoClientSpanOutsideATrace(t *testing.T) {
	d := startDriver(t)
	b, rec, _ := tracedBackend(t, d)
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Unary(context.Background(), createVolume, mustMarshal(t, &csi.CreateVolumeRequest{Name: "v"})); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans for calls made outside any trace, want 0", n)
	}
	if md, _, _ := d.seen(); len(md.Get("traceparent")) != 0 {
		t.Errorf("the driver got traceparent %q outside any trace", md.Get("traceparent"))
	}
}
