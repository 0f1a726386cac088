package proxy

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/auth"
)

func TestConfine(t *testing.T) {
	blueCert := auth.Identity{Kind: "x509", SPIFFEID: "spiffe://example.org/cluster/blue"}
	opsCert := auth.Identity{Kind: "x509", CommonName: "ops"}
	policy := ListenerPolicy{
		Clients: auth.ClientAllowList{Key: "listeners[0].clients", Rules: []auth.ClientRule{
			{URI: blueCert.SPIFFEID, Tenant: "blue"}, {CN: "ops"},
		}},
		Methods: auth.MethodAllowList{Key: "listeners[0].methods", Patterns: []string{"/csi.v1.Identity/*", "/csi.v1.Controller/*"}},
		Tenant:  "shared",
	}
	for _, tc := range []struct {
		name, method string
		id           auth.Identity
		wantCode     codes.Code
		wantTenant   string
	}{
		{"the rule's tenant", "/csi.v1.Controller/CreateVolume", blueCert, codes.OK, "blue"},
		{"the listener's tenant when the rule names none", "/csi.v1.Identity/Probe", opsCert, codes.OK, "shared"},
		{"a method off the list", "/csi.v1.Node/NodeStageVolume", blueCert, codes.PermissionDenied, ""},
		{"an unknown service off the list", "/x.Y/Z", opsCert, codes.PermissionDenied, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotTenant := ""
			h := confine(policy)(func(ctx context.Context, _ *Call) error {
				gotTenant = auth.TenantFromContext(ctx)
				return nil
			})
			err := h(auth.NewContext(context.Background(), tc.id), &Call{Method: tc.method})
			if status.Code(err) != tc.wantCode || gotTenant != tc.wantTenant {
				t.Errorf("%v, tenant %q; want %v, tenant %q", err, gotTenant, tc.wantCode, tc.wantTenant)
			}
		})
	}
	err := confine(policy)(func(context.Context, *Call) error { return nil })(context.Background(), &Call{Method: "/csi.v1.Node/NodeGetInfo"})
	if want := "csi-gateway: /csi.v1.Node/NodeGetInfo is not allowed on this listener (listeners[0].methods: /csi.v1.Identity/*, /csi.v1.Controller/*)"; status.Convert(err).Message() != want {
		t.Errorf("refusal %q, want %q", status.Convert(err).Message(), want)
	}
}
