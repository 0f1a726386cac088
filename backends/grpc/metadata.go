package grpcbackend

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// outgoingContext returns ctx with the caller's incoming metadata as the outgoing metadata of
// the call to the driver, minus what belongs to one HTTP/2 hop (see dropHopHeaders), and the
// caller's user-agent, which the call's transport sends instead (callerAgent). Outgoing
// metadata the gateway already put in ctx (trace context, for one) is kept and wins over the
// caller's value of the same key. The deadline and cancellation of ctx carry over as they are:
// grpc sends the remaining time as grpc-timeout.
func outgoingContext(ctx context.Context) (context.Context, string) {
	in, _ := metadata.FromIncomingContext(ctx) // a copy: ctx's own metadata is not changed
	ua := callerAgent(in)
	md := dropHopHeaders(in)
	if out, ok := metadata.FromOutgoingContext(ctx); ok {
		for k, v := range out {
			md[k] = v
		}
	}
	return metadata.NewOutgoingContext(ctx, md), ua
}

// forwarding returns what a caller's call takes to the driver: its outgoing context (see
// outgoingContext) and the agent of its user-agent (nil: the backend's own), acquired: the
// caller releases it when the call is over.
func (b *Backend) forwarding(ctx context.Context) (context.Context, *agent) {
	out, ua := outgoingContext(ctx)
	return out, b.agents.acquire(ua)
}

// dropHopHeaders removes from md, in place, the keys that describe one HTTP/2 hop rather than
// the call: pseudo-headers (":authority"), "content-type", "user-agent", "te", connection
// headers, and every "grpc-*" key (grpc-timeout is carried by the deadline, the others are
// grpc's own framing). It returns md, or an empty MD for a nil one: never nil. Callers pass
// metadata they own (a copy, or what a call option filled in).
func dropHopHeaders(md metadata.MD) metadata.MD {
	if md == nil {
		return metadata.MD{}
	}
	for k := range md {
		if hopHeader(k) {
			delete(md, k)
		}
	}
	return md
}

func hopHeader(key string) bool {
	k := strings.ToLower(key)
	if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") {
		return true
	}
	switch k {
	case "content-type", "user-agent", "te", "host", "connection", "keep-alive",
		"proxy-connection", "transfer-encoding", "upgrade":
		return true
	}
	return false
}

// relayResponseMetadata sets the driver's response header and trailer metadata on the caller's
// server stream found in ctx. Errors are ignored: ctx is not always a server context (Ready,
// tests, in-process callers), and headers the caller's stream has already sent cannot change.
func relayResponseMetadata(ctx context.Context, header, trailer metadata.MD) {
	if md := dropHopHeaders(header); len(md) > 0 {
		_ = grpc.SetHeader(ctx, md)
	}
	if md := dropHopHeaders(trailer); len(md) > 0 {
		_ = grpc.SetTrailer(ctx, md)
	}
}
