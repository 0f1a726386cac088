package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// stampedVersion is the version TestVersionIsReportedEverywhere stamps into its binary, as
// `make build` does with the output of git describe.
const stampedVersion = "v0.0.0-e2e.stamped"

// buildStamped builds cmd/csi-gateway with -X main.version=stampedVersion into a temporary
// directory and returns the binary's path.
func buildStamped(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "csi-gateway")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version="+stampedVersion, "-o", bin, "github.com/csi-gateway/csi-gateway/cmd/csi-gateway")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestVersionIsReportedEverywhere: `csi-gateway --version` and `csi-gateway version` print the
// same build info (the stamped version first, then commit, date, dirty state and the Go
// version), and GetPluginInfo of the embedded appliance reports that version, both from the
// appliance command and through the gateway's embedded backend.
func TestVersionIsReportedEverywhere(t *testing.T) {
	bin := buildStamped(t)
	run := func(args ...string) string {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("csi-gateway %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	flag, sub := run("--version"), run("version")
	if flag != sub {
		t.Errorf("--version printed\n%s\nbut version printed\n%s", flag, sub)
	}
	lines := strings.Split(strings.TrimSuffix(sub, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("version printed %d lines, want 5:\n%s", len(lines), sub)
	}
	if want := "csi-gateway " + stampedVersion; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	for i, prefix := range []string{"commit: ", "date: ", "dirty: ", "go: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.HasPrefix(lines[i+1], prefix) {
			t.Errorf("line %d is %q, want it to start with %q", i+2, lines[i+1], prefix)
		}
	}
	printed := strings.TrimPrefix(lines[0], "csi-gateway ")

	dir := t.TempDir()
	appliance := "unix://" + filepath.Join(dir, "appliance.sock")
	testutil.StartCommand(t, bin, "appliance", "--data", filepath.Join(dir, "appliance-data"), "--endpoint", appliance)
	if got := pluginVersion(t, testutil.Dial(t, appliance)); got != printed {
		t.Errorf("the appliance's GetPluginInfo vendor_version is %q, version printed %q", got, printed)
	}

	sock := filepath.Join(dir, "gw.sock")
	config := fmt.Sprintf("listeners:\n  - endpoint: unix://%s\nbackends:\n  local: {type: embedded, dataDir: %q}\nroutes:\n  - {methods: [\"*\"], backend: local}\n",
		sock, filepath.Join(dir, "gateway-data"))
	writeFile(t, filepath.Join(dir, "gateway.yaml"), config)
	testutil.StartCommand(t, bin, "serve", "--config", filepath.Join(dir, "gateway.yaml"))
	if got := pluginVersion(t, testutil.Dial(t, "unix://"+sock)); got != printed {
		t.Errorf("the gateway's embedded backend reports vendor_version %q, version printed %q", got, printed)
	}
}

// pluginVersion asks conn's GetPluginInfo for its vendor_version.
func pluginVersion(t *testing.T, conn *grpc.ClientConn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		t.Fatalf("GetPluginInfo: %v", err)
	}
	return info.GetVendorVersion()
}
