package auth

import (
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
)

// Authorizer decides whether an identity may call through a listener: nil, or an error
// saying why not. UIDAllowList and ClientAllowList are the gateway's.
type Authorizer interface {
	Authorize(Identity) error
}

// IdentityOf returns the caller's identity as a listener's transport credentials
// established it: Unix peer credentials, or the verified client certificate of a TLS
// connection; "anonymous" when there is none (plaintext TCP, or a certificate that was not
// verified).
func IdentityOf(info credentials.AuthInfo) Identity {
	switch info := info.(type) {
	case PeerAuthInfo:
		return info.Identity
	case credentials.TLSInfo:
		if id, ok := TLSIdentity(info); ok {
			return id
		}
	}
	return Identity{Kind: "anonymous"}
}

// AdmittingCredentials are a listener's transport credentials with its admission check: once
// the inner handshake established who the caller is (SO_PEERCRED on a Unix socket, the
// verified certificate of a TLS connection), Admit decides whether they may connect at all.
// A refused caller's connection is closed inside ServerHandshake, before the server reads a
// byte of HTTP/2 from it, so it costs one connection and no HTTP/2 state. It fails closed: a
// caller whose identity cannot be established is refused unless Admit admits anonymous ones.
type AdmittingCredentials struct {
	credentials.TransportCredentials
	Admit Authorizer
	// Refused, when set, learns of each refused caller (to log it); it must not block.
	Refused func(Identity, error)
}

// ServerHandshake makes the inner handshake, then admits or refuses the caller.
func (c AdmittingCredentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		return nil, nil, err
	}
	id := IdentityOf(info)
	if err := c.Admit.Authorize(id); err != nil {
		if c.Refused != nil {
			c.Refused(id, err) // before the close, which the caller sees at once
		}
		nc.Close()
		return nil, nil, fmt.Errorf("caller refused: %w", err)
	}
	return nc, info, nil
}

// Clone implements credentials.TransportCredentials.
func (c AdmittingCredentials) Clone() credentials.TransportCredentials {
	c.TransportCredentials = c.TransportCredentials.Clone()
	return c
}
