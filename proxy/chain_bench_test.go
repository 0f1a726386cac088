package proxy

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/csispec"
	"github.com/csi-gateway/csi-gateway/test/bench/messages"
)

// chainBackend answers every call from memory: the capability RPCs from caps, any other
// method with its pre-encoded answer in answers. It allocates nothing per call, so that
// BenchmarkChain measures the gateway's middleware chain alone.
type chainBackend struct {
	caps    *fakeCaps
	answers map[string][]byte
}

func (b *chainBackend) Unary(ctx context.Context, method string, _ []byte) ([]byte, error) {
	backends.CallInfoFrom(ctx).AddAttempt()
	if resp, ok, err := b.caps.answer(method); ok {
		return resp, err
	}
	return b.answers[method], nil
}

func (b *chainBackend) Stream(context.Context, string, grpc.ServerStream) error {
	return backends.Errorf(backends.ClassUnimplemented, "backend \"bench\": no streams here")
}

func (b *chainBackend) Ready(context.Context) error { return nil }
func (b *chainBackend) Close() error                { return nil }

// BenchmarkChain is the cost of the middleware chain on `make bench`'s workloads, without any
// transport: the server's handler is called directly, in front of a backend that answers from
// memory, in the gateway's two bench modes:
//
//   - Full, (c): validation enforced, a JSON log line at info level for every call, every call
//     traced (with the server span the tracing stats handler would start) and metrics;
//   - Passthrough, (b): validation off, logging at error, no tracing, metrics.
func BenchmarkChain(b *testing.B) {
	mustMarshal := func(m proto.Message) []byte {
		raw, err := proto.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		return raw
	}
	const volumeName = "pvc-5f1c6a2e-8d0b-4c1e-9a57-3b2d7e0f4a19"
	workloads := []struct {
		name, method string
		req, resp    proto.Message
	}{
		{"Probe", "/csi.v1.Identity/Probe", &csi.ProbeRequest{}, &csi.ProbeResponse{}},
		{"CreateVolume", "/csi.v1.Controller/CreateVolume", messages.CreateVolumeRequest(volumeName), messages.CreateVolumeResponse(volumeName)},
		{"ListVolumes100", "/csi.v1.Controller/ListVolumes", messages.ListVolumesRequest(), messages.ListVolumesResponse()},
		{"NodePublishVolume", "/csi.v1.Node/NodePublishVolume", messages.NodePublishVolumeRequest("vol-pvc-5f1c6a2e"), &csi.NodePublishVolumeResponse{}},
	}
	// Without STAGE_UNSTAGE_VOLUME, as `make bench`'s backend: NodePublishVolume needs no
	// staging_target_path.
	caps := valAllCaps().without(csispec.NodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME))
	be := &chainBackend{caps: caps, answers: map[string][]byte{}}
	for _, w := range workloads {
		be.answers[w.method] = mustMarshal(w.resp)
	}
	sampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discardExporter{}))
	b.Cleanup(func() { sampled.Shutdown(context.Background()) })
	modes := []struct {
		name       string
		level      slog.Level
		validation ValidationMode
		tracer     trace.Tracer
	}{
		{"Full", slog.LevelInfo, ValidationEnforce, sampled.Tracer("bench")},
		{"Passthrough", slog.LevelError, ValidationOff, tracenoop.NewTracerProvider().Tracer("bench")},
	}
	base := auth.NewContext(context.Background(), auth.Identity{Kind: "unix", UID: 0})
	for _, mode := range modes {
		srv, err := NewServer(Options{
			Routes:     []Route{{Methods: []string{"*"}, Backend: "bench"}},
			Backends:   map[string]backends.Backend{"bench": be},
			Log:        slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: mode.level})),
			Validation: mode.validation,
			Metrics:    NewMetrics("bench", nil),
		})
		if err != nil {
			b.Fatal(err)
		}
		h := srv.handler(ListenerPolicy{})
		for _, w := range workloads {
			raw := mustMarshal(w.req)
			info := srv.methods[w.method]
			run := func() error {
				ctx, span := mode.tracer.Start(base, w.method[1:])
				defer span.End()
				ctx, _ = backends.WithCallInfo(ctx)
				return h(ctx, &Call{Method: w.method, Start: time.Now(), Request: raw, info: info})
			}
			if err := run(); err != nil { // also fills the capability cache
				b.Fatalf("%s %s: %v", mode.name, w.name, err)
			}
			b.Run(mode.name+"/"+w.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
