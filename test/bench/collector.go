package main

import (
	"context"
	"net"
	"sync/atomic"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// spanCollector is an OTLP/gRPC trace collector on loopback that counts the spans the full
// gateway exports and keeps none: the gateway pays what it pays in production (protobuf
// encoding, a batched export over gRPC), and the collector's own work stays in the bench's
// process, off the relay's CPU figures.
type spanCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	spans  atomic.Int64
	server *grpc.Server
	addr   string
}

// startSpanCollector listens on a free 127.0.0.1 port.
func startSpanCollector() (*spanCollector, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &spanCollector{server: grpc.NewServer(), addr: l.Addr().String()}
	collectortrace.RegisterTraceServiceServer(c.server, c)
	go c.server.Serve(l) //nolint:errcheck // ends with stop
	return c, nil
}

// Export counts the request's spans.
func (c *spanCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	var n int64
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += int64(len(ss.GetSpans()))
		}
	}
	c.spans.Add(n)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// stop closes the collector's listener and connections.
func (c *spanCollector) stop() { c.server.Stop() }
