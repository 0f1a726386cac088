package auth

import "context"

type tenantKey struct{}

// WithTenant returns ctx carrying the tenant the call acts for.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFromContext returns the tenant the call acts for; "" when it is not confined to one.
func TenantFromContext(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}
