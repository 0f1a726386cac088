// Package h2grpc is a small gRPC-over-HTTP/2 transport built directly on golang.org/x/net/http2's
// Framer and hpack: a Server that hands every call to one grpc.StreamHandler, and a ClientConn
// that implements grpc.ClientConnInterface. It exists for the gateway's relay hot path (issue #8),
// where grpc-go's transports cost most of the per-call CPU: here a unary call is one HEADERS +
// DATA write and one HEADERS + DATA + trailers write, each flushed once, with no writer
// goroutine and no per-call goroutine on the client (one reader goroutine per connection
// completes calls).
//
// What it owns: the HTTP/2 connection (preface, SETTINGS, PING, GOAWAY, RST_STREAM, flow control
// in both directions, HEADERS/CONTINUATION with hpack), gRPC message framing (the 5-byte
// prefix), gRPC metadata, status and timeout encoding, grpc-go compatible stats.Handler events
// (so otelgrpc's handlers work unchanged) and the grpc call options the gateway uses
// (Header, Trailer, Peer, ForceCodecV2, MaxCallRecvMsgSize), plus its own CallUserAgent (unlike
// grpc-go's, where the user-agent belongs to the connection, each call may carry its own).
// A server holds each client to hard limits (ServerConfig): the frame size it reads, the
// header list, concurrent streams, the handshake, the first message and unread answers in
// time, PINGs (grpc-go's keepalive enforcement) and stream resets (h2limit.ResetBudget).
//
// What it refuses to do: compression (a compressed message is refused with the status grpc-go
// uses), name resolution, load balancing, retries, sending keepalive pings, a background
// reconnect loop (the ClientConn dials lazily on the next call), channelz, binary logging and
// interceptors.
// Compose middleware in the handler instead.
//
// Concurrency: Server, ClientConn and their streams are safe for the concurrent use grpc-go
// allows (one goroutine sending and one receiving per stream). Per connection, writes go through
// one mutex-guarded bufio.Writer; the reader goroutine never blocks on that mutex (it queues
// its control frames for whoever holds it), so two peers writing large messages at each other
// cannot deadlock.
package h2grpc
