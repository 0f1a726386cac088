package backends

import (
	"context"

	"google.golang.org/grpc"
)

// Backend is where the gateway sends calls. Implementations are safe for concurrent use.
//
// Requests and responses cross this interface as protobuf wire bytes: the gateway forwards
// what the caller sent without re-encoding it, and a backend that needs typed messages
// decodes them itself (see Codec). Errors should be *Error values with a Class; anything else
// is treated as ClassInternal by the gateway.
type Backend interface {
	// Unary sends one unary call and returns the raw response.
	Unary(ctx context.Context, method string, req []byte) ([]byte, error)
	// Stream forwards a streaming call (or any call the gateway has no description of)
	// frame by frame between the caller's stream and the backend. Backends that cannot
	// stream return an *Error of ClassUnimplemented.
	Stream(ctx context.Context, method string, caller grpc.ServerStream) error
	// Ready reports whether the backend can take calls now.
	Ready(ctx context.Context) error
	// Close releases connections; calls after Close fail.
	Close() error
}
