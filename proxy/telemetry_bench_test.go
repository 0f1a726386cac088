package proxy

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/tracing"
)

// benchDriver answers ControllerPublishVolume at once, so that the benchmark measures the
// gateway and not the driver.
type benchDriver struct {
	csi.UnimplementedControllerServer
}

func (benchDriver) ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"lun": "3"}}, nil
}

// discardExporter is an exporter that drops what it is given: the batching, the span
// snapshots and the export calls are paid for, the network is not.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracing is the cost of tracing on one unary call (ControllerPublishVolume, whose
// volume_id and node_id become attributes) through the in-process gateway and a grpc backend to
// a driver on a Unix socket: tracing off (no stats handlers), on at sample ratio 0 (spans
// made, not recorded; trace context still sent), and on at ratio 1 (server and client spans
// recorded and batched to an exporter that drops them). "parallel" runs GOMAXPROCS callers.
func BenchmarkTracing(b *testing.B) {
	for _, mode := range []struct {
		name  string
		on    bool
		ratio float64
	}{
		{"off", false, 0},
		{"ratio=0", true, 0},
		{"ratio=1", true, 1},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var tp trace.TracerProvider
			if mode.on {
				p, shutdown, err := tracing.NewProvider(context.Background(),
					tracing.Config{Exporter: tracing.ExporterNone, SampleRatio: mode.ratio}, tracing.WithExporter(discardExporter{}))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { shutdown(context.Background()) })
				tp = p
			}
			client := benchGateway(b, tp)
			req := &csi.ControllerPublishVolumeRequest{VolumeId: "vol-5f1c6a2e", NodeId: "node-1", VolumeCapability: serverMountCap()}
			ctx := context.Background()
			if _, err := client.ControllerPublishVolume(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := client.ControllerPublishVolume(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := client.ControllerPublishVolume(ctx, req); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// benchGateway serves a benchDriver on a Unix socket, and the gateway in front of it through a
// grpc backend (both traced with tp when it is not nil), and returns a client of the gateway.
func benchGateway(b *testing.B, tp trace.TracerProvider) csi.ControllerClient {
	b.Helper()
	prop := tracing.Propagator()
	dir := b.TempDir()
	drv := grpc.NewServer()
	csi.RegisterControllerServer(drv, benchDriver{})
	dl, err := net.Listen("unix", filepath.Join(dir, "driver.sock"))
	if err != nil {
		b.Fatal(err)
	}
	go drv.Serve(dl)
	b.Cleanup(drv.Stop)

	opts := Options{
		Routes:   []Route{{Methods: []string{"*"}, Backend: "array"}},
		Backends: map[string]backends.Backend{"array": newGRPCBackend(b, DefaultTransport, dl.Addr().String(), tp, prop)},
		Log:      slog.New(slog.DiscardHandler),
	}
	if tp != nil {
		opts.StatsHandlers = []stats.Handler{TracingStatsHandler(tp, prop)}
	}
	srv, err := NewServer(opts)
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "gw.sock")
	l, err := Listen(Endpoint{Scheme: "unix", Address: sock}, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l, ListenerPolicy{})
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return csi.NewControllerClient(conn)
}
