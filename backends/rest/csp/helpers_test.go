package csp

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends/rest"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp/cspfake"
)

// canaryPassword is the CSP password of every test: it must appear in no error.
const canaryPassword = "CANARY-csp-password-5e1f"

// rig is a backend in front of a fake CSP over real TLS on loopback.
type rig struct {
	fake *cspfake.Fake
	srv  *httptest.Server
	b    *Backend
	dir  string
}

// newRig starts a fake CSP of profile and a backend for it; mutate adjusts the config.
func newRig(t *testing.T, profile cspfake.Profile, mutate ...func(*Config)) *rig {
	t.Helper()
	opts := cspfake.Options{Profile: profile, Username: "csi", Password: canaryPassword, Validate: true}
	if profile == cspfake.ProfileTrueNAS {
		opts.ArrayIP = "192.0.2.10"
	}
	fake, err := cspfake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := Config{URL: srv.URL + "/csp", Profile: string(profile), ArrayIP: opts.ArrayIP,
		UsernameFile: write("username", "csi"), PasswordFile: write("password", canaryPassword),
		Nodes: map[string]Node{"node-1": {IQNs: []string{"iqn.1993-08.org.debian:01:node1"}, Networks: []string{"192.0.2.0/24"}}}}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := New("array1", cfg, rest.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	r := &rig{fake: fake, srv: srv, b: b, dir: dir}
	t.Cleanup(func() {
		if v := fake.ContractViolations(); len(v) > 0 {
			t.Errorf("requests or answers outside the CSP contract:\n%v", v)
		}
	})
	return r
}

// call sends one CSI call through the backend, as the gateway does (wire bytes in and out).
func call[Resp proto.Message](t *testing.T, r *rig, method string, req proto.Message) (Resp, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return callCtx[Resp](ctx, t, r, method, req)
}

func callCtx[Resp proto.Message](ctx context.Context, t *testing.T, r *rig, method string, req proto.Message) (Resp, error) {
	t.Helper()
	var resp Resp
	in, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.b.Unary(ctx, method, in)
	if err != nil {
		return resp, err
	}
	resp = resp.ProtoReflect().Type().New().Interface().(Resp)
	if err := proto.Unmarshal(out, resp); err != nil {
		t.Fatal(err)
	}
	return resp, nil
}
