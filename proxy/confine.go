package proxy

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/auth"
)

// confine applies what a listener restricts an admitted caller to: the methods it may call
// (PERMISSION_DENIED for the others) and the tenant its calls act for, which it puts in the
// context for the tenancy stage. It is the first middleware that refuses calls (callers were
// admitted in the handshake).
func confine(p ListenerPolicy) Middleware {
	ruleTenants := slices.ContainsFunc(p.Clients.Rules, func(r auth.ClientRule) bool { return r.Tenant != "" })
	return func(next Handler) Handler {
		if len(p.Methods.Patterns) == 0 && p.Tenant == "" && !ruleTenants {
			return next // nothing to confine callers to: no cost per call
		}
		return func(ctx context.Context, call *Call) error {
			if err := p.Methods.Allow(call.Method); err != nil {
				return status.Errorf(codes.PermissionDenied, "csi-gateway: %v", err)
			}
			if tenant := p.tenantOf(ctx, ruleTenants); tenant != "" {
				ctx = auth.WithTenant(ctx, tenant)
			}
			return next(ctx, call)
		}
	}
}

// tenantOf returns the tenant an admitted caller acts for: its client rule's tenant (looked
// up only when some rule names one), else the listener's.
func (p ListenerPolicy) tenantOf(ctx context.Context, ruleTenants bool) string {
	if id, ok := auth.FromContext(ctx); ok && ruleTenants {
		if r, ok := p.Clients.Match(id); ok && r.Tenant != "" {
			return r.Tenant
		}
	}
	return p.Tenant
}
