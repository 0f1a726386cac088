package grpcbackend

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// BenchmarkUnary is the cost of one unary call through the backend to a driver on a Unix
// socket (TestMain runs it over grpc-go's client, then over the frame client): a caller
// without a user-agent (the backend's own connection), and a caller with one (the agent of
// its user-agent: agents.go).
func BenchmarkUnary(b *testing.B) {
	d := startAgentDriver(b, socketPath(b, "d.sock"))
	be, err := New("drv", Config{Target: d.target}, WithFrames(framesUnderTest), WithUserAgent("csi-gateway/bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	for _, c := range []struct {
		name string
		md   metadata.MD
	}{
		{"own", metadata.Pairs("x-caller", "1")},
		{"caller", metadata.Pairs("x-caller", "1", "user-agent", "csi-provisioner/v5.1.0 grpc-go/1.70.0")},
	} {
		ctx := metadata.NewIncomingContext(context.Background(), c.md)
		if _, err := be.Unary(ctx, "/csi.v1.Identity/GetPluginInfo", nil); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := be.Unary(ctx, "/csi.v1.Identity/GetPluginInfo", nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
