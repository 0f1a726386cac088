package h2grpc

import (
	"context"
	"testing"

	"google.golang.org/grpc"
)

// benchEcho is the benchmarks' handler: one message in, the same out.
func benchEcho(_ any, ss grpc.ServerStream) error {
	var f frame
	if err := ss.RecvMsg(&f); err != nil {
		return err
	}
	return ss.SendMsg(&f)
}

// BenchmarkUnary compares a unary round trip (100-byte message, Unix socket) through
// h2grpc on both sides with grpc-go on both sides, one call at a time and in parallel.
func BenchmarkUnary(b *testing.B) {
	paths := []struct {
		name  string
		setup func(b *testing.B) grpc.ClientConnInterface
	}{
		{"h2grpc", func(b *testing.B) grpc.ClientConnInterface {
			_, addr := startServer(b, ServerConfig{Handler: benchEcho})
			return newTestClient(b, addr, ClientConfig{})
		}},
		{"h2grpc-workers", func(b *testing.B) grpc.ClientConnInterface {
			_, addr := startServer(b, ServerConfig{Handler: benchEcho, Workers: 4})
			return newTestClient(b, addr, ClientConfig{})
		}},
		{"grpc-go", func(b *testing.B) grpc.ClientConnInterface {
			l := unixListener(b)
			s := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(benchEcho))
			go s.Serve(l)
			b.Cleanup(s.Stop)
			return grpcClient(b, l.Addr().String())
		}},
	}
	msg := payload(100)
	for _, p := range paths {
		b.Run(p.name+"/serial", func(b *testing.B) {
			cc := p.setup(b)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				var got frame
				if err := cc.Invoke(ctx, "/bench.Echo/Unary", &frame{b: msg}, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(p.name+"/parallel", func(b *testing.B) {
			cc := p.setup(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var got frame
					if err := cc.Invoke(ctx, "/bench.Echo/Unary", &frame{b: msg}, &got); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
