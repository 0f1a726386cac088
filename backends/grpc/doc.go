// Package grpc is the passthrough backend: it forwards raw CSI frames to a gRPC driver over a
// Unix socket or mTLS TCP, keeping metadata, trailers, deadlines and server streams intact.
package grpc
