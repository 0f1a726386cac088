package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestGatewaySanity runs csi-sanity through the real gateway binary on each backend path —
// the embedded appliance in-process, the appliance over REST, the appliance over gRPC — with
// filesystem and with block volumes: each must pass what the appliance passes directly.
func TestGatewaySanity(t *testing.T) {
	var variants []string
	for _, path := range []string{"embedded", "rest", "grpc"} {
		for _, access := range []string{"mount", "block"} {
			variants = append(variants, path+"-"+access)
		}
	}
	testutil.SanityVariants(t, variants, func(t *testing.T, variant string) {
		if os.Geteuid() != 0 {
			t.Skip("csi-sanity's node specs mount volumes: run the tests as root")
		}
		path, access, _ := strings.Cut(variant, "-")
		dir := t.TempDir()
		gateway := startGateway(t, dir, path)

		testutil.RunSanity(t, testutil.ApplianceSanityConfig(dir, gateway, access))
	})
}

// startGateway starts the gateway binary in front of the appliance reached by path
// ("embedded", "rest" or "grpc") and returns the gateway's endpoint once it answers.
func startGateway(t *testing.T, dir, path string) string {
	t.Helper()
	data := filepath.Join(dir, "data")
	var backend string
	switch path {
	case "embedded":
		backend = fmt.Sprintf("{type: embedded, dataDir: %q, maxVolumesPerNode: 4}", data)
	case "rest":
		addr := freeLoopbackAddr(t)
		testutil.Start(t, "appliance", "--data", data, "--endpoint", "unix://"+filepath.Join(dir, "appliance.sock"),
			"--http", addr, "--max-volumes-per-node", "4")
		testutil.Dial(t, "unix://"+filepath.Join(dir, "appliance.sock"))
		backend = fmt.Sprintf("{type: rest, urls: [%q]}", "http://"+addr)
	case "grpc":
		sock := "unix://" + filepath.Join(dir, "appliance.sock")
		testutil.Start(t, "appliance", "--data", data, "--endpoint", sock, "--max-volumes-per-node", "4")
		testutil.Dial(t, sock)
		backend = fmt.Sprintf("{type: grpc, target: %q}", sock)
	}
	endpoint := "unix://" + filepath.Join(dir, "gateway.sock")
	config := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf("listeners:\n  - endpoint: %s\nbackends:\n  appliance: %s\nroutes:\n  - {methods: [\"*\"], backend: appliance}\n", endpoint, backend)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "serve", "--config", config)
	testutil.Dial(t, endpoint)
	return endpoint
}
