package proxy

import (
	"context"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/redact"
)

// TestParseRepair: a grpc backend defaults to spec, the others to plugin; a setting written
// out wins, and an unknown one is refused naming the choices.
func TestParseRepair(t *testing.T) {
	for _, tc := range []struct {
		in, backendType string
		want            Repair
	}{
		{"", "grpc", RepairSpec},
		{"", "rest", RepairPlugin},
		{"", "embedded", RepairPlugin},
		{"none", "grpc", RepairNone},
		{"plugin", "grpc", RepairPlugin},
		{"spec", "rest", RepairSpec},
	} {
		if got, err := ParseRepair(tc.in, tc.backendType); err != nil || got != tc.want {
			t.Errorf("ParseRepair(%q, %q) = %q, %v; want %q", tc.in, tc.backendType, got, err, tc.want)
		}
	}
	if _, err := ParseRepair("always", "grpc"); err == nil {
		t.Error("ParseRepair accepted an unknown setting")
	}
}

// TestRepairOnSpan: a call the gateway answered otherwise than its backend has the backend's
// code, scrubbed message and the kinds of repair on its span.
func TestRepairOnSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	h := annotateSpan(redact.NewRedactor())(func(_ context.Context, call *Call) error {
		call.noteRepair(codes.NotFound, "no such volume", []string{repairCode})
		return nil
	})
	if err := h(ctx, &Call{Method: "/csi.v1.Controller/DeleteVolume", Start: time.Now()}); err != nil {
		t.Fatal(err)
	}
	span.End()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	checkAttrs(t, ended[0], map[string]any{"csi.backend.status_code": "NotFound", "csi.backend.status_message": "no such volume"})
	found := false
	for _, kv := range ended[0].Attributes() {
		if kv.Key == "csi.repairs" {
			found = slices.Equal(kv.Value.AsStringSlice(), []string{repairCode})
		}
	}
	if !found {
		t.Errorf("csi.repairs missing or wrong in %v", ended[0].Attributes())
	}
}
