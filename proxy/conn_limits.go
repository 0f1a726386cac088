package proxy

import (
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/internal/h2limit"
)

// watchedCredentials are a grpc-go listener's transport credentials with an h2limit.Conn
// under each connection once its handshake is done: it ends the connection of a client that
// resets streams faster than limits.maxStreamResetsPerSecond, or whose closed flow-control
// window holds an answer back for limits.writeTimeout (grpc-go keeps such an answer queued
// until the connection closes, and gives a handler no way to reset its stream). The frames
// transport holds its connections to the same rules itself.
type watchedCredentials struct {
	credentials.TransportCredentials
	cfg h2limit.Config
	log *rateLimitedLog
}

// watched returns creds with l's connection-level limits for grpc-go's server.
func (l TransportLimits) watched(creds credentials.TransportCredentials, log *slog.Logger) credentials.TransportCredentials {
	l = l.withDefaults()
	return watchedCredentials{TransportCredentials: creds, log: newRateLimitedLog(log),
		cfg: h2limit.Config{
			ResetsPerSecond: l.MaxStreamResetsPerSecond,
			WriteTimeout:    l.WriteTimeout,
			// Streams grpc-go runs, and those whose answer waits after their handler returned.
			MaxStreams: 4 * int(l.MaxConcurrentStreams),
		}}
}

// connEndedMessages say in the log why a connection was ended.
var connEndedMessages = map[string]string{
	h2limit.ReasonTooManyResets: "connection closed: the caller reset streams faster than limits.maxStreamResetsPerSecond",
	h2limit.ReasonWriteTimeout:  "connection closed: an answer waited limits.writeTimeout for the caller to read it",
}

// ServerHandshake makes the inner handshake and watches the connection.
func (c watchedCredentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		return nil, nil, err
	}
	cfg := c.cfg
	cfg.Ended = func(reason string) {
		c.log.warn(connEndedMessages[reason], "caller", auth.IdentityOf(info).String(), "local", conn.LocalAddr().String())
	}
	return h2limit.NewConn(nc, cfg), info, nil
}

// Clone implements credentials.TransportCredentials.
func (c watchedCredentials) Clone() credentials.TransportCredentials {
	c.TransportCredentials = c.TransportCredentials.Clone()
	return c
}
