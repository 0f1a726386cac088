package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// probeUntil runs grpc_health_probe until it exits with want, for at most 30 s (the gateway
// starting, readiness cached for 2 s), and returns its last output.
func probeUntil(t *testing.T, bin, addr string, want int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := testutil.RunTool(t, bin, "-addr="+addr, "-connect-timeout=2s", "-rpc-timeout=5s")
		if code == want {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("grpc_health_probe -addr=%s: exit %d, want %d within 30s\n%s", addr, code, want, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestGrpcToolsAgainstTheBinary: the real gateway in front of a CSI driver (the appliance
// command) over a grpc backend. While the driver is down, grpc_health_probe answers
// NOT_SERVING (exit 4); once it runs, SERVING; grpcurl, with no proto files, lists the CSI
// services and calls GetPluginInfo through the gateway.
func TestGrpcToolsAgainstTheBinary(t *testing.T) {
	probe := testutil.Tool(t, "GRPC_HEALTH_PROBE", "grpc_health_probe")
	grpcurl := testutil.Tool(t, "GRPCURL", "grpcurl")
	dir := t.TempDir()
	sock, driver := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "driver.sock")
	gw := testutil.Start(t, "serve", "--config", writeFile(t, filepath.Join(dir, "gateway.yaml"), fmt.Sprintf(`listeners: [{endpoint: "unix://%s"}]
backends:
  driver: {type: grpc, target: "unix://%s"}
routes: [{methods: ["*"], backend: driver}]
`, sock, driver)))

	if out := probeUntil(t, probe, "unix://"+sock, 4); !strings.Contains(out, "NOT_SERVING") {
		t.Errorf("grpc_health_probe with the driver down says:\n%s", out)
	}
	testutil.Start(t, "appliance", "--data", filepath.Join(dir, "data"), "--endpoint", "unix://"+driver)
	if out := probeUntil(t, probe, "unix://"+sock, 0); !strings.Contains(out, "SERVING") {
		t.Errorf("grpc_health_probe with the driver up says:\n%s", out)
	}

	if out, code := testutil.RunTool(t, grpcurl, "-plaintext", "-unix", sock, "list"); code != 0 || !strings.Contains(out, "csi.v1.Controller\n") || !strings.Contains(out, "grpc.health.v1.Health\n") {
		t.Errorf("grpcurl list: exit %d\n%s\ngateway:\n%s", code, out, gw.Output())
	}
	if out, code := testutil.RunTool(t, grpcurl, "-plaintext", "-unix", sock, "csi.v1.Identity/GetPluginInfo"); code != 0 || !strings.Contains(out, `"name": "embedded.csi-gateway.io"`) {
		t.Errorf("grpcurl csi.v1.Identity/GetPluginInfo: exit %d\n%s\ngateway:\n%s", code, out, gw.Output())
	}
	if strings.Contains(gw.Output(), "grpc.health") || strings.Contains(gw.Output(), "ServerReflection") {
		t.Errorf("health or reflection calls were logged:\n%s", gw.Output())
	}
}

// TestReadmeGrpcRecipe runs the README's grpcurl and grpc_health_probe lines, as written,
// against the binary serving the embedded appliance on .run/csi.sock, as `make run` does.
func TestReadmeGrpcRecipe(t *testing.T) {
	tools := map[string]string{
		"grpcurl":           testutil.Tool(t, "GRPCURL", "grpcurl"),
		"grpc_health_probe": testutil.Tool(t, "GRPC_HEALTH_PROBE", "grpc_health_probe"),
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		for name, bin := range tools {
			if strings.HasPrefix(line, name+" ") {
				script = append(script, bin+strings.TrimPrefix(line, name))
			}
		}
	}
	if len(script) < 3 {
		t.Fatalf("README.md has %d grpcurl/grpc_health_probe lines, want the recipe's", len(script))
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, ".run", "csi.sock")
	testutil.Start(t, "serve", "--endpoint", "unix://"+sock, "--data-dir", filepath.Join(dir, ".run", "data"))
	testutil.Dial(t, "unix://"+sock)
	cmd := exec.Command("sh", "-eux", "-c", strings.Join(script, "\n"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PWD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "csi.v1.Controller\n") || !strings.Contains(string(out), "status: SERVING") {
		t.Fatalf("the README's grpc recipe: %v\n%s", err, out)
	}
}
