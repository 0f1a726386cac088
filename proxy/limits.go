package proxy

import (
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/csi-gateway/csi-gateway/internal/bytesize"
	"github.com/csi-gateway/csi-gateway/internal/h2grpc"
)

// TransportLimits are the hard limits of every listener (limits: in the configuration file),
// the same on both transports: what one caller may make the gateway hold, and for how long.
// A zero field takes its default (DefaultTransportLimits). The sizes are bytes, or in the
// file a string with a unit ("16KiB", "64Ki": bytesize.Parse). They map to
// h2grpc.ServerConfig and to grpc.ServerOptions here, and nowhere else.
type TransportLimits struct {
	// MaxFrameSize is the largest HTTP/2 frame read (and the SETTINGS_MAX_FRAME_SIZE
	// announced): a larger one ends the connection with FRAME_SIZE_ERROR before its payload
	// is read. grpc-go's server reads 16 KiB frames at most, so with transport grpc only
	// the default is accepted.
	MaxFrameSize bytesize.Size32 `mapstructure:"maxFrameSize"`
	// MaxHeaderListSize bounds a request's header block, decoded and counted as hpack does
	// (each field's name and value plus 32 bytes): beyond it the stream is refused.
	MaxHeaderListSize bytesize.Size32 `mapstructure:"maxHeaderListSize"`
	// MaxConcurrentStreams bounds the calls in flight on one connection; clients are told,
	// and the streams beyond it are refused (RST_STREAM REFUSED_STREAM).
	MaxConcurrentStreams uint32 `mapstructure:"maxConcurrentStreams"`
	// MaxConnections bounds the connections open on one listener; one accepted beyond it is
	// closed at once (Accept never waits for a slot).
	MaxConnections int `mapstructure:"maxConnections"`
	// FirstMessageTimeout bounds how long a call's first request message may take to arrive
	// after its headers (the call's deadline, when sooner, still ends it first); then the call
	// ends and its handler returns. It also bounds a new connection's handshake (TLS) and
	// HTTP/2 preface: a connection that says nothing must not hold one of MaxConnections.
	FirstMessageTimeout time.Duration `mapstructure:"firstMessageTimeout"`
	// WriteTimeout bounds how long an answer may wait for a caller that does not read (opens
	// no flow-control window); then the stream ends.
	WriteTimeout time.Duration `mapstructure:"writeTimeout"`
	// KeepaliveMinTime is the shortest interval allowed between a client's PINGs; a client
	// that pings more often gets GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings").
	KeepaliveMinTime time.Duration `mapstructure:"keepaliveMinTime"`
	// MaxStreamResetsPerSecond is how fast a connection's client may reset its streams
	// (RST_STREAM), beyond a burst of as many at once (h2limit.ResetBudget); a client that
	// resets faster loses the connection, against the rapid-reset attack (CVE-2023-44487).
	MaxStreamResetsPerSecond int `mapstructure:"maxStreamResetsPerSecond"`
}

// DefaultTransportLimits are the limits of a listener whose configuration sets none. CSI
// calls carry a few hundred bytes of metadata and a few KiB of message; kubelet and each
// sidecar hold one connection per socket, with at most their worker count of calls in flight
// (100 for the external-provisioner's default). keepaliveMinTime stays below the 5-minute
// keepalive of the gateway's own grpc backends (a gateway in front of another), and neither
// kubelet nor the sidecars ping at all.
var DefaultTransportLimits = TransportLimits{
	MaxFrameSize:         16384,
	MaxHeaderListSize:    64 << 10,
	MaxConcurrentStreams: 100,
	MaxConnections:       256,
	FirstMessageTimeout:  10 * time.Second,
	WriteTimeout:         30 * time.Second,
	KeepaliveMinTime:     time.Minute,
	// A sidecar cancels its calls one by one (a deadline, a lost lease): a few a second, and
	// at worst its whole maxConcurrentStreams at once.
	MaxStreamResetsPerSecond: 200,
}

// withDefaults returns l with every zero field set to its default.
func (l TransportLimits) withDefaults() TransportLimits {
	d := DefaultTransportLimits
	orDefault(&l.MaxFrameSize, d.MaxFrameSize)
	orDefault(&l.MaxHeaderListSize, d.MaxHeaderListSize)
	orDefault(&l.MaxConcurrentStreams, d.MaxConcurrentStreams)
	orDefault(&l.MaxConnections, d.MaxConnections)
	orDefault(&l.MaxStreamResetsPerSecond, d.MaxStreamResetsPerSecond)
	orDefault(&l.FirstMessageTimeout, d.FirstMessageTimeout)
	orDefault(&l.WriteTimeout, d.WriteTimeout)
	orDefault(&l.KeepaliveMinTime, d.KeepaliveMinTime)
	return l
}

// orDefault sets *v to def when it is zero.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate checks l for transport t; errors name the key at fault ("limits.maxFrameSize: ...").
func (l TransportLimits) Validate(t Transport) error {
	l = l.withDefaults()
	switch {
	case l.MaxFrameSize < 16384 || l.MaxFrameSize > 1<<24-1:
		return fmt.Errorf("limits.maxFrameSize: %d is not between 16384 and 16777215 (HTTP/2's bounds)", l.MaxFrameSize)
	case t == TransportGRPC && l.MaxFrameSize != 16384:
		return fmt.Errorf("limits.maxFrameSize: grpc-go's server reads frames of 16384 bytes at most; %d needs transport: frames", l.MaxFrameSize)
	case l.MaxHeaderListSize < 4096:
		return fmt.Errorf("limits.maxHeaderListSize: %d is below 4096 bytes; gRPC's own headers need about 200, callers' metadata more", l.MaxHeaderListSize)
	}
	for _, f := range []struct {
		key      string
		value    any
		negative bool
	}{
		{"maxConnections", l.MaxConnections, l.MaxConnections < 0},
		{"firstMessageTimeout", l.FirstMessageTimeout, l.FirstMessageTimeout < 0},
		{"writeTimeout", l.WriteTimeout, l.WriteTimeout < 0},
		{"keepaliveMinTime", l.KeepaliveMinTime, l.KeepaliveMinTime < 0},
		{"maxStreamResetsPerSecond", l.MaxStreamResetsPerSecond, l.MaxStreamResetsPerSecond < 0},
	} {
		if f.negative {
			return fmt.Errorf("limits.%s: %v is negative", f.key, f.value)
		}
	}
	return nil
}

// h2grpcConfig sets l's limits in an h2grpc server's configuration.
func (l TransportLimits) h2grpcConfig(cfg *h2grpc.ServerConfig) {
	l = l.withDefaults()
	cfg.MaxFrameSize = uint32(l.MaxFrameSize)
	cfg.MaxHeaderListSize = uint32(l.MaxHeaderListSize)
	cfg.MaxConcurrentStreams = l.MaxConcurrentStreams
	cfg.KeepaliveMinTime = l.KeepaliveMinTime
	cfg.FirstMessageTimeout = l.FirstMessageTimeout
	cfg.HandshakeTimeout = l.FirstMessageTimeout
	cfg.WriteTimeout = l.WriteTimeout
	cfg.MaxStreamResetsPerSecond = l.MaxStreamResetsPerSecond
}

// grpcOptions returns l's limits as grpc-go server options, with creds as the server's
// transport credentials and handler as its unknown-service handler. grpc-go reads frames of
// 16 KiB at most already; it has no first-message or write timeout of its own, so a
// callGuard adds them around handler; nor a bound on stream resets or on answers a client
// leaves unread after the handler returned, so watchedCredentials add them under its
// connections.
func (l TransportLimits) grpcOptions(creds credentials.TransportCredentials, handler grpc.StreamHandler, log *slog.Logger) []grpc.ServerOption {
	l = l.withDefaults()
	g := callGuard{firstMessage: l.FirstMessageTimeout, write: l.WriteTimeout}
	return []grpc.ServerOption{
		grpc.Creds(l.watched(creds, log)),
		grpc.MaxHeaderListSize(uint32(l.MaxHeaderListSize)),
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.ConnectionTimeout(l.FirstMessageTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.InTapHandle(g.tap),
		grpc.UnknownServiceHandler(g.guard(handler)),
	}
}
