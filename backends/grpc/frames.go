package grpcbackend

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"

	"github.com/csi-gateway/csi-gateway/internal/h2grpc"
	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

// WithFrames says whether calls and streams go over the gateway's own HTTP/2 frame client
// (internal/h2grpc, true) or over grpc-go's (false, the default). The frame client keeps one
// connection per target, made by the first call and made again by the first call after it
// breaks; it writes a unary call in one write and its reader completes it, with the same
// metadata, deadline, credentials, spans and errors as grpc-go's. Readiness probes go over it
// too, so no grpc-go connection is made at all.
func WithFrames(on bool) Option {
	return func(o *options) { o.frames = on }
}

// tcpKeepAlive finds a TCP driver that vanished without closing the connection (a host that
// lost power, a network partition) within about a minute, so the next call dials again
// instead of waiting out its deadline on a dead connection. The frame client sends no HTTP/2
// pings; on a Unix socket the kernel reports a dead peer at once.
var tcpKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3}

// dialFrames returns the frame client of the target at addr (unconnected), whose calls carry
// the user-agent ua unless they set their own (h2grpc.CallUserAgent).
func dialFrames(addr string, kind targetKind, creds credentials.TransportCredentials, handlers []stats.Handler, ua string) grpc.ClientConnInterface {
	network, address, authority := frameAddress(addr, kind)
	d := net.Dialer{KeepAliveConfig: tcpKeepAlive}
	return h2grpc.NewClientConn(h2grpc.ClientConfig{
		Dial:          func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, network, address) },
		Creds:         creds,
		Authority:     authority,
		Codec:         rawcodec.Codec{},
		StatsHandlers: handlers,
		UserAgent:     ua,
	})
}

// frameAddress is where a target checked by parseTarget is dialled, and the :authority its
// calls carry (as grpc-go's: "localhost" on a Unix socket, host:port on TCP, whose host
// TLS verifies).
func frameAddress(addr string, kind targetKind) (network, address, authority string) {
	u, _ := url.Parse(addr) // parseTarget has checked it
	if kind == tcpTarget {
		hostPort := strings.TrimPrefix(u.Path, "/")
		return "tcp", hostPort, hostPort
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	return "unix", p, "localhost"
}
