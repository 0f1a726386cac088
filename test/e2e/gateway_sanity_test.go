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
// filesystem and with block volumes: each must pass what the appliance passes directly. Every
// variant runs on the default transport, grpc-go; grpc-mount-frames runs the gRPC path, whose
// listener and backend client both change with the transport, on frames.
func TestGatewaySanity(t *testing.T) {
	var variants []string
	for _, path := range []string{"embedded", "rest", "grpc"} {
		for _, access := range []string{"mount", "block"} {
			variants = append(variants, path+"-"+access)
		}
	}
	variants = append(variants, "grpc-mount-frames")
	testutil.SanityVariants(t, variants, func(t *testing.T, variant string) {
		if os.Geteuid() != 0 {
			t.Skip("csi-sanity's node specs mount volumes: run the tests as root")
		}
		path, rest, _ := strings.Cut(variant, "-")
		access, transport, _ := strings.Cut(rest, "-")
		dir := t.TempDir()
		admin := testutil.FreeAddr(t)
		gateway := startGateway(t, dir, path, transport, admin)

		testutil.RunSanity(t, testutil.ApplianceSanityConfig(dir, gateway, access))
		checkSanityMetrics(t, "http://"+admin+"/metrics")
	})
}

// checkSanityMetrics checks what a csi-sanity run leaves in the gateway's metrics: the
// sidecars' histogram, per full method and code, including the failures the suite provokes.
func checkSanityMetrics(t *testing.T, url string) {
	t.Helper()
	fams := scrapeMetrics(t, url)
	seen := map[string]uint64{}
	for _, m := range fams["csigw_operations_seconds"].GetMetric() {
		l := metricLabels(m)
		if l["driver_name"] != "embedded.csi-gateway.io" {
			t.Errorf("driver_name %q, want the configured admin.driverName", l["driver_name"])
		}
		seen[l["method_name"]+" "+l["grpc_status_code"]] += m.GetHistogram().GetSampleCount()
	}
	for _, want := range []string{
		"/csi.v1.Controller/CreateVolume OK", "/csi.v1.Controller/CreateVolume InvalidArgument",
		"/csi.v1.Controller/DeleteVolume OK", "/csi.v1.Node/NodeStageVolume OK",
		"/csi.v1.Node/NodePublishVolume OK", "/csi.v1.Controller/ControllerPublishVolume NotFound",
		"/csi.v1.Identity/GetPluginInfo OK",
	} {
		if seen[want] == 0 {
			t.Errorf("csigw_operations_seconds has no sample for %s after a csi-sanity run", want)
		}
	}
	t.Logf("csigw_operations_seconds: %d method/code series after the run", len(seen))
}

// startGateway starts the gateway binary in front of the appliance reached by path
// ("embedded", "rest" or "grpc"), on transport (empty: the default), with its admin endpoints
// on admin, and returns the gateway's endpoint once it answers.
func startGateway(t *testing.T, dir, path, transport, admin string) string {
	t.Helper()
	data := filepath.Join(dir, "data")
	var backend string
	switch path {
	case "embedded":
		backend = fmt.Sprintf("{type: embedded, dataDir: %q, maxVolumesPerNode: 4}", data)
	case "rest":
		addr := testutil.FreeAddr(t)
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
	yaml := fmt.Sprintf("listeners:\n  - endpoint: %s\nbackends:\n  appliance: %s\nroutes:\n  - {methods: [\"*\"], backend: appliance}\n"+
		"admin: {listen: %q, driverName: embedded.csi-gateway.io}\n", endpoint, backend, admin)
	if transport != "" {
		yaml += "transport: " + transport + "\n"
	}
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "serve", "--config", config)
	testutil.Dial(t, endpoint)
	return endpoint
}
