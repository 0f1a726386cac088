package proxy

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/auth"
)

// authorizer decides whether an identity may call through a listener.
type authorizer interface {
	Authorize(auth.Identity) error
}

// identify returns the caller's identity as the listener's transport credentials
// established it when the connection was accepted; "anonymous" when there is none.
func identify(ctx context.Context) auth.Identity {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(auth.PeerAuthInfo); ok {
			return info.Identity
		}
	}
	return auth.Identity{Kind: "anonymous"}
}

// authorize refuses callers the listener's authorizer does not admit, with
// PERMISSION_DENIED and the authorizer's reason. It runs after the log middleware so that
// refused calls are logged too.
func authorize(az authorizer) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			id, _ := auth.FromContext(ctx)
			if err := az.Authorize(id); err != nil {
				return status.Errorf(codes.PermissionDenied, "csi-gateway: %v", err)
			}
			return next(ctx, call)
		}
	}
}
