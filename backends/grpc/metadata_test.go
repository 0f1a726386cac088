package grpcbackend

import (
	"context"
	"reflect"
	"strings"
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
		wantUA   string
	}{
		{"no metadata", nil, nil, metadata.MD{}, ""},
		{"incoming only", metadata.Pairs("x-a", "1", "user-agent", "c"), nil, metadata.Pairs("x-a", "1"), "c"},
		{"gateway's outgoing wins", metadata.Pairs("x-a", "1", "traceparent", "caller"), metadata.Pairs("traceparent", "gateway"),
			metadata.Pairs("x-a", "1", "traceparent", "gateway"), ""},
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
			out, ua := outgoingContext(ctx)
			got, _ := metadata.FromOutgoingContext(out)
			if !reflect.DeepEqual(got, tt.want) || ua != tt.wantUA {
				t.Fatalf("outgoing %v, user-agent %q; want %v, %q", got, ua, tt.want, tt.wantUA)
			}
			if in, _ := metadata.FromIncomingContext(ctx); tt.incoming != nil && !reflect.DeepEqual(in, before) {
				t.Fatalf("the caller's metadata became %v, was %v", in, before)
			}
		})
	}
}

// TestCallerAgent: the caller's user-agent goes on as it is, cut to maxUserAgentBytes; one
// that is not printable ASCII does not go on at all.
func TestCallerAgent(t *testing.T) {
	long := strings.Repeat("a", maxUserAgentBytes+100)
	for _, c := range []struct {
		name string
		in   metadata.MD
		want string
	}{
		{"none", nil, ""},
		{"one", metadata.Pairs("user-agent", "csi-provisioner/v5.1.0 grpc-go/1.70.0"), "csi-provisioner/v5.1.0 grpc-go/1.70.0"},
		{"the first of two", metadata.MD{"user-agent": {"kubelet/v1.31.4", "other/1"}}, "kubelet/v1.31.4"},
		{"too long", metadata.Pairs("user-agent", long), long[:maxUserAgentBytes]},
		{"not printable", metadata.Pairs("user-agent", "caller/1\x00"), ""},
		{"not ASCII", metadata.Pairs("user-agent", "caller/1 é"), ""},
	} {
		if got := callerAgent(c.in); got != c.want {
			t.Errorf("%s: callerAgent = %q, want %q", c.name, got, c.want)
		}
	}
}
