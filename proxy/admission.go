package proxy

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/auth"
)

// authorizer decides whether an identity may call through a listener.
type authorizer interface {
	Authorize(auth.Identity) error
}

// identify returns the caller's identity as the listener's transport credentials
// established it when the connection was accepted: Unix peer credentials, or the verified
// client certificate of a TLS listener; "anonymous" when there is none.
func identify(ctx context.Context) auth.Identity {
	if p, ok := peer.FromContext(ctx); ok {
		switch info := p.AuthInfo.(type) {
		case auth.PeerAuthInfo:
			return info.Identity
		case credentials.TLSInfo:
			if id, ok := auth.TLSIdentity(info); ok {
				return id
			}
		}
	}
	return auth.Identity{Kind: "anonymous"}
}

// authorize refuses callers the listener's authorizer does not admit, with
// PERMISSION_DENIED and the authorizer's reason (UNAUTHENTICATED when the reason is that the
// caller has no identity the authorizer can check, auth.ErrUnauthenticated). It runs after the log middleware so that
// refused calls are logged too.
func authorize(az authorizer) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			id, _ := auth.FromContext(ctx)
			if err := az.Authorize(id); err != nil {
				if errors.Is(err, auth.ErrUnauthenticated) {
					return status.Errorf(codes.Unauthenticated, "csi-gateway: %v", err)
				}
				return status.Errorf(codes.PermissionDenied, "csi-gateway: %v", err)
			}
			return next(ctx, call)
		}
	}
}
