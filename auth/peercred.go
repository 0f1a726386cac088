package auth

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
)

// UnixPeerCredentials is gRPC transport "security" for Unix sockets: it adds no encryption
// (the kernel keeps a Unix socket private to the machine) but reads the connecting process's
// credentials with SO_PEERCRED during the handshake, so every call carries who made it.
type UnixPeerCredentials struct{}

var _ credentials.TransportCredentials = UnixPeerCredentials{}

// PeerAuthInfo is the AuthInfo of a connection accepted with UnixPeerCredentials.
type PeerAuthInfo struct {
	credentials.CommonAuthInfo
	Identity Identity
}

// AuthType implements credentials.AuthInfo.
func (PeerAuthInfo) AuthType() string { return "unix-peercred" }

// ServerHandshake reads the peer's credentials. A connection that is not a Unix socket
// (a *net.UnixConn, or a wrapper of one that is a syscall.Conn with a unix address), or whose
// credentials cannot be read, is refused: the listener fails closed.
func (UnixPeerCredentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok || conn.LocalAddr().Network() != "unix" {
		return nil, nil, fmt.Errorf("peer credentials need a Unix socket, got %T", conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, nil, err
	}
	if credErr != nil {
		return nil, nil, fmt.Errorf("read the caller's credentials (SO_PEERCRED): %w", credErr)
	}
	id := Identity{Kind: "unix", UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}
	return conn, PeerAuthInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, Identity: id}, nil
}

// ClientHandshake is not used: these credentials are for servers only.
func (UnixPeerCredentials) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, fmt.Errorf("unix peer credentials are for servers only")
}

// Info implements credentials.TransportCredentials.
func (UnixPeerCredentials) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "unix-peercred"}
}

// Clone implements credentials.TransportCredentials.
func (c UnixPeerCredentials) Clone() credentials.TransportCredentials { return c }

// OverrideServerName implements credentials.TransportCredentials (deprecated in grpc).
func (UnixPeerCredentials) OverrideServerName(string) error { return nil }
