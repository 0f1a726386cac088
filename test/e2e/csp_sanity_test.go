package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends/rest/csp/cspfake"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// cspCanaryPassword is the CSP user's password in the csp tests: it must appear in no log,
// span, metric or error message of the gateway.
const cspCanaryPassword = "CANARY-array-password-7c2d"

// fakeCSP is where a gateway finds a fake CSP: its URL, the CA file that verifies it (as
// example.com) and the credentials files.
type fakeCSP struct{ url, ca, user, password string }

// startFakeCSP serves a fake CSP with opts over TLS on loopback until the test ends, and
// writes its CA and the user's credentials (user "csi", cspCanaryPassword) into dir.
func startFakeCSP(t *testing.T, dir string, opts cspfake.Options) (*cspfake.Fake, fakeCSP) {
	t.Helper()
	opts.Username, opts.Password, opts.Validate = "csi", cspCanaryPassword, true
	fake, err := cspfake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	return fake, fakeCSP{url: srv.URL,
		ca:       writeFile(t, filepath.Join(dir, "csp-ca.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))),
		user:     writeFile(t, filepath.Join(dir, "username"), "csi\n"),
		password: writeFile(t, filepath.Join(dir, "password"), cspCanaryPassword+"\n")}
}

// TestCSPSanity runs csi-sanity's identity and controller specs through the real gateway →
// rest backend with protocol csp → the fake CSP (over TLS on loopback), once per quirk
// profile: 0 failed. Node specs are skipped: a CSP is controller-only (the gateway routes
// Node calls to the embedded appliance only so that csi-sanity can learn a node ID).
// Every request the gateway sent and every answer the fake gave must match openapi.yaml,
// and the password and the session token must appear nowhere the gateway writes.
func TestCSPSanity(t *testing.T) {
	testutil.SanityVariants(t, []string{"spec", "hpe", "truenas"}, func(t *testing.T, profile string) {
		dir := t.TempDir()
		opts := cspfake.Options{Profile: cspfake.Profile(profile)}
		arrayIP := ""
		if profile == "truenas" {
			opts.ArrayIP, arrayIP = "192.0.2.10", "192.0.2.10"
		}
		fake, csp := startFakeCSP(t, dir, opts)
		// The node side: a CSP has none, so a node driver written here tells csi-sanity the
		// node's ID (no topology, no staging) and accepts the cleanup's unpublish.
		node := startTestDriver(t, dir, "node.sock", func(_ context.Context, c *driverCall, send func([]byte) error) error {
			switch c.Method {
			case "/csi.v1.Node/NodeGetInfo":
				return send(marshal(&csi.NodeGetInfoResponse{NodeId: "node-1"}))
			case "/csi.v1.Node/NodeGetCapabilities", "/csi.v1.Node/NodeUnpublishVolume",
				"/csi.v1.Identity/GetPluginCapabilities", "/csi.v1.Identity/Probe":
				return nil // the empty answer
			}
			return status.Errorf(codes.Unimplemented, "%s: not in this test's node driver", c.Method)
		})
		admin := testutil.FreeAddr(t)
		endpoint := "unix://" + filepath.Join(dir, "csi.sock")
		gw := testutil.Start(t, "serve", "--config", writeFile(t, filepath.Join(dir, "gateway.yaml"), fmt.Sprintf(`listeners: [{endpoint: %q}]
backends:
  array:
    type: rest
    protocol: csp
    urls: [%q]
    tls: {ca: %s, serverName: example.com}
    auth: {usernameFile: %s, passwordFile: %s}
    csp:
      profile: %s
      arrayIP: %q
      nodes: [{id: node-1, iqns: ["iqn.1993-08.org.debian:01:node1"], networks: ["192.0.2.0/24"]}]
  node: {type: grpc, target: %q}
routes:
  - {methods: ["/csi.v1.Node/*"], backend: node}
  - {methods: ["*"], backend: array}
logging: {level: debug}
admin: {listen: %q}
tracing: {exporter: stdout, sampleRatio: 1}
`, endpoint, csp.url+"/csp", csp.ca, csp.user, csp.password, profile, arrayIP, node.Endpoint, admin)))
		testutil.Dial(t, endpoint)

		cfg := testutil.ApplianceSanityConfig(dir, endpoint, "mount")
		cfg.TestNodeVolumeAttachLimit = false
		cfg.TestVolumeMutableParameters = map[string]string{"tier": "premium"}
		if profile == "truenas" {
			cfg.TestVolumeMutableParameters = map[string]string{"compression": "lz4"}
		}
		skips := []testutil.SanitySkip{{Pattern: `\bNode Service\b`, Why: "a CSP is controller-only: it has no node side"}}
		if profile == "truenas" {
			skips = append(skips, testutil.SanitySkip{Pattern: regexp.QuoteMeta("should fail when requesting to create a snapshot with already existing name and different source volume ID"),
				Why: "truenas-csp names snapshots per volume and can look a name up only on one volume (GET /snapshots needs volume_id, GET /volumes lists nothing): a name reused on another source cannot be detected (docs/backends/csp.md)"})
		}
		testutil.RunSanity(t, cfg, skips...)

		if v := fake.ContractViolations(); len(v) > 0 {
			t.Errorf("%d requests or answers outside openapi.yaml:\n%s", len(v), strings.Join(v, "\n"))
		}
		calls := fake.Calls()
		t.Logf("csp %s: %d CSP calls, counters %+v", profile, len(calls), fake.Counters())
		_, metrics, err := getHTTP("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the last spans reach stdout
		for _, sink := range []struct{ name, text string }{{"the gateway's output (logs, spans)", gw.Output()}, {"/metrics", metrics}} {
			if strings.Contains(sink.text, cspCanaryPassword) {
				t.Errorf("the CSP password appears in %s", sink.name)
			}
			for _, tok := range fake.IssuedTokens() {
				if strings.Contains(sink.text, tok) {
					t.Errorf("a CSP session token appears in %s", sink.name)
				}
			}
		}
	})
}
