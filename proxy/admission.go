package proxy

import (
	"context"
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/csi-gateway/csi-gateway/auth"
)

// identify returns the caller's identity as the listener's transport credentials
// established it when the connection was accepted: Unix peer credentials, or the verified
// client certificate of a TLS listener; "anonymous" when there is none.
func identify(ctx context.Context) auth.Identity {
	if p, ok := peer.FromContext(ctx); ok {
		return auth.IdentityOf(p.AuthInfo)
	}
	return auth.Identity{Kind: "anonymous"}
}

// admitting returns the credentials a listener serves with: the policy's (Unix peer
// credentials when it has none) with its admission check, so that a caller the listener does
// not admit (a uid not in allowUIDs/allowGIDs, a client certificate not in clients) is refused
// in the handshake, before a byte of HTTP/2 is read from it. Each refusal is logged at warn
// with the caller's identity, at most once a second per listener (a refused caller that
// reconnects in a loop cannot fill the log; the next line counts those not logged).
func (p ListenerPolicy) admitting(l net.Listener, log *slog.Logger) credentials.TransportCredentials {
	var creds credentials.TransportCredentials = auth.UnixPeerCredentials{}
	if p.Creds != nil {
		creds = p.Creds
	}
	refusals := newRateLimitedLog(log, "listener", l.Addr().String())
	return auth.AdmittingCredentials{TransportCredentials: creds, Admit: p.authorizer(),
		Refused: func(id auth.Identity, err error) {
			refusals.warn("caller refused at the handshake", "caller", id.String(), "reason", err.Error())
		}}
}
