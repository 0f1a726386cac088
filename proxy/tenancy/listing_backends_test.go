package tenancy

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest"
	"github.com/csi-gateway/csi-gateway/backends/rest/connect"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp/cspfake"
)

// listingBackends are the backends a tenant's listings are tested on, each real and on
// loopback: the appliance in process; the appliance served over HTTPS (as `csi-gateway
// appliance` serves it) to a REST backend of the connect protocol; and the fake CSP over
// HTTPS to a REST backend of the csp protocol.
var listingBackends = []struct {
	name string
	open func(t *testing.T) backends.Backend
}{
	{"embedded", func(t *testing.T) backends.Backend { return openAppliance(t, t.TempDir()) }},
	{"rest-connect", openRESTAppliance},
	{"rest-csp", openCSPFake},
}

// onListingBackends runs test on a world of each of listingBackends.
func onListingBackends(t *testing.T, test func(t *testing.T, w *world)) {
	for _, b := range listingBackends {
		t.Run(b.name, func(t *testing.T) { test(t, newWorldOn(t, b.open(t), nil)) })
	}
}

// openRESTAppliance serves the appliance over HTTPS on loopback and returns a REST backend
// of it, both closed when the test ends.
func openRESTAppliance(t *testing.T) backends.Backend {
	t.Helper()
	var r connect.Registrar
	openAppliance(t, t.TempDir()).Appliance().Register(&r)
	srv := httptest.NewTLSServer(connect.NewHandler(r.Services()))
	t.Cleanup(srv.Close)
	b, err := rest.New("appliance", rest.Config{URLs: []string{srv.URL}}, rest.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// openCSPFake serves a fake CSP (the spec profile) over HTTPS on loopback and returns a csp
// backend of it, both closed when the test ends.
func openCSPFake(t *testing.T) backends.Backend {
	t.Helper()
	const user, password = "csi", "CANARY-tenancy-csp-password-7c2d"
	fake, err := cspfake.New(cspfake.Options{Profile: cspfake.ProfileSpec, Username: user, Password: password, Validate: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	for name, v := range map[string]string{"username": user, "password": password} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, err := csp.New("array1", csp.Config{URL: srv.URL + "/csp", Profile: string(cspfake.ProfileSpec),
		UsernameFile: filepath.Join(dir, "username"), PasswordFile: filepath.Join(dir, "password")},
		rest.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	t.Cleanup(func() {
		if v := fake.ContractViolations(); len(v) > 0 {
			t.Errorf("requests or answers outside the CSP contract:\n%v", v)
		}
	})
	return b
}
