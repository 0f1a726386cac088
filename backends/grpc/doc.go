// Package grpcbackend is the passthrough backend: it forwards raw CSI frames to a gRPC driver
// over a Unix socket or mTLS TCP, keeping metadata, trailers, deadlines and server streams
// intact. Its directory is backends/grpc; its name is not grpc so that it does not shadow
// google.golang.org/grpc where both are imported.
//
// Unary calls go out in one Invoke with internal/rawcodec (Codec, Frame): the request bytes reach the
// driver as the caller sent them and the response comes back as the driver wrote it. Streams,
// and calls of services the gateway has no description of, are relayed frame by frame with
// github.com/mwitkow/grpc-proxy. Errors are classified (*backends.Error) and prefixed with the
// backend's name; the driver's status details are dropped.
//
// A backend may have several targets (addresses of the same driver) in failover order: a call
// goes to the one that worked last, and moves to the next only when it could not reach its
// driver at all, so the request was never seen there (failover.go).
//
// The caller's user-agent reaches the driver, followed by the client's token; the backend's
// own calls carry WithUserAgent's (agents.go: on grpc-go's transport, whose user-agent is per
// connection, a bounded set of connections per caller user-agent).
//
// It refuses to decode or re-encode messages, to retry a call a driver may have seen (one such
// call is one attempt; retrying is the gateway's decision), and to talk TCP without TLS.
package grpcbackend
