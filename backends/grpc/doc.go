// Package grpc is the passthrough backend: it forwards raw CSI frames to a gRPC driver over a
// Unix socket or mTLS TCP, keeping metadata, trailers, deadlines and server streams intact.
//
// Unary calls go out in one Invoke with a raw codec (Codec, Frame): the request bytes reach the
// driver as the caller sent them and the response comes back as the driver wrote it. Streams,
// and calls of services the gateway has no description of, are relayed frame by frame with
// github.com/mwitkow/grpc-proxy. Errors are classified (*backends.Error) and prefixed with the
// backend's name; the driver's status details are dropped.
//
// It refuses to decode or re-encode messages, to retry (one call is one attempt; retrying is the
// gateway's decision), and to talk TCP without TLS.
package grpc
