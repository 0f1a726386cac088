package proxy

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// limitConnections returns l bounded to MaxConnections connections open at a time: a
// connection accepted beyond it is closed at once, and Accept goes on to the next one (unlike
// x/net's netutil.LimitListener, which stops accepting until a slot frees, so a listener
// held full would leave its callers waiting in the kernel's queue without an answer). Each
// closed connection is logged at warn, rate-limited.
func (l TransportLimits) limitConnections(lis net.Listener, log *slog.Logger) net.Listener {
	return &limitListener{Listener: lis, max: int64(l.withDefaults().MaxConnections),
		refusals: newRateLimitedLog(log, "listener", lis.Addr().String())}
}

type limitListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	refusals *rateLimitedLog
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refusals.warn("connection closed: the listener has limits.maxConnections open", "max_connections", l.max)
		c.Close()
	}
}

// limitedConn gives its slot back when it is first closed. It passes SyscallConn and
// CloseWrite through, for the peer credentials' SO_PEERCRED and for h2grpc's drain.
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
