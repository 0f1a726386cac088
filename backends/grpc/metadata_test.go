package grpcbackend

import (
	"context"
	"reflect"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestDropHopHeaders(t *testing.T) {
	in := metadata.MD{
		":authority":     {"localhost"},
		"content-type":   {"application/grpc"},
		"user-agent":     {"caller/1.0"},
		"te":             {"trailers"},
		"grpc-timeout":   {"1S"},
		"grpc-trace-bin": {"x"},
		"x-custom":       {"a", "b"},
		"traceparent":    {"00-1-2-01"},
		"x-data-bin":     {"\x00\x01"},
	}
	want := metadata.MD{
		"x-custom":    {"a", "b"},
		"traceparent": {"00-1-2-01"},
		"x-data-bin":  {"\x00\x01"},
	}
	if got := dropHopHeaders(in); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(in, want) {
		t.Fatalf("dropHopHeaders = %v, leaving %v; want %v, in place", got, in, want)
	}
	if dropHopHeaders(nil) == nil {
		t.Fatal("dropHopHeaders(nil) is nil")
	}
}

func TestOutgoingContext(t *testing.T) {
	tests := []struct {
		name     string
		incoming metadata.MD
		outgoing metadata.MD
		want     metadata.MD
	}{
		{"no metadata", nil, nil, metadata.MD{}},
		{"incoming only", metadata.Pairs("x-a", "1", "user-agent", "c"), nil, metadata.Pairs("x-a", "1")},
		{"gateway's outgoing wins", metadata.Pairs("x-a", "1", "traceparent", "caller"), metadata.Pairs("traceparent", "gateway"),
			metadata.Pairs("x-a", "1", "traceparent", "gateway")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.incoming != nil {
				ctx = metadata.NewIncomingContext(ctx, tt.incoming)
			}
			if tt.outgoing != nil {
				ctx = metadata.NewOutgoingContext(ctx, tt.outgoing)
			}
			before := tt.incoming.Copy()
			got, _ := metadata.FromOutgoingContext(outgoingContext(ctx))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("outgoing %v, want %v", got, tt.want)
			}
			if in, _ := metadata.FromIncomingContext(ctx); tt.incoming != nil && !reflect.DeepEqual(in, before) {
				t.Fatalf("the caller's metadata became %v, was %v", in, before)
			}
		})
	}
}
