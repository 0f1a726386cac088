package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

const tapCanary = "CANARY-tap-31d7"

// TestGatewayTap runs the real gateway with an admin listener and the real `csi-gateway tap`
// against it: the three calls made while the tap runs come out of it, in order, with their
// methods, codes and IDs, and the secret the calls carried comes out nowhere.
func TestGatewayTap(t *testing.T) {
	dir := t.TempDir()
	admin := testutil.FreeAddr(t)
	gw := startGatewayWith(t, dir, fmt.Sprintf(`admin: {listen: %q}
backends:
  appliance: {type: embedded, dataDir: %q}
routes:
  - {methods: ["*"], backend: appliance}
`, admin, filepath.Join(dir, "data")))
	waitListening(t, gw.Process, admin)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tapped := startTap(ctx, t, admin, 3)

	secrets := map[string]string{"password": tapCanary}
	ctl := csi.NewControllerClient(gw.Conn)
	created, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name:               "tap-e2e",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{mountCapability()},
		Secrets:            secrets,
	})
	checkStatus(t, "CreateVolume", err, codes.OK)
	volumeID := created.GetVolume().GetVolumeId()
	_, err = ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "tap-e2e-missing"})
	checkStatus(t, "ControllerGetVolume", err, codes.NotFound)
	_, err = ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: volumeID, Secrets: secrets})
	checkStatus(t, "DeleteVolume", err, codes.OK)

	out, stderr := tapped()
	if strings.Contains(out+stderr, tapCanary) {
		t.Errorf("the secret sent in the calls is in the tap's output:\n%s%s", out, stderr)
	}
	type record struct {
		Method, Code string
		IDs          map[string]string
		Backend      string
	}
	want := []record{
		{"CreateVolume", "OK", map[string]string{"name": "tap-e2e"}, "appliance"},
		{"ControllerGetVolume", "NotFound", map[string]string{"volume_id": "tap-e2e-missing"}, "appliance"},
		{"DeleteVolume", "OK", map[string]string{"volume_id": volumeID}, "appliance"},
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("the tap printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, line := range lines {
		var got record
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
		w := want[i]
		if got.Method != w.Method || got.Code != w.Code || got.Backend != w.Backend || fmt.Sprint(got.IDs) != fmt.Sprint(w.IDs) {
			t.Errorf("line %d: %+v, want %+v\n%s", i+1, got, w, line)
		}
	}
}

// startTap runs `csi-gateway tap --output json` against the gateway's admin address until it
// has printed count calls, and returns once it is subscribed (calls that end before would
// not be in it). The returned function waits for it to end and returns its stdout and
// stderr; the test fails if it cannot subscribe or fails.
func startTap(ctx context.Context, t *testing.T, admin string, count int) func() (stdout, stderr string) {
	t.Helper()
	return startTapOutput(ctx, t, admin, count, "json")
}

// startTapOutput is startTap with the tap's --output (json or table).
func startTapOutput(ctx context.Context, t *testing.T, admin string, count int, output string) func() (stdout, stderr string) {
	t.Helper()
	tap := exec.CommandContext(ctx, testutil.Binary(t), "tap", "--admin", admin, "--count", strconv.Itoa(count), "--output", output)
	var out bytes.Buffer
	tap.Stdout = &out
	stderrPipe, err := tap.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tap.Start(); err != nil {
		t.Fatal(err)
	}
	// tap says on stderr when it is subscribed.
	connected := make(chan struct{})
	stderrDone := make(chan string, 1)
	go func() {
		var all strings.Builder
		lines := bufio.NewScanner(stderrPipe)
		for lines.Scan() {
			all.WriteString(lines.Text() + "\n")
			if strings.Contains(lines.Text(), "streaming the calls") {
				close(connected)
			}
		}
		stderrDone <- all.String()
	}()
	select {
	case <-connected:
	case stderr := <-stderrDone:
		tap.Wait()
		t.Fatalf("csi-gateway tap ended before it was subscribed:\n%s", stderr)
	case <-ctx.Done():
		t.Fatal("csi-gateway tap did not subscribe in time")
	}
	return func() (string, string) {
		t.Helper()
		stderr := <-stderrDone
		if err := tap.Wait(); err != nil {
			t.Fatalf("csi-gateway tap: %v\nstdout:\n%s\nstderr:\n%s", err, &out, stderr)
		}
		return out.String(), stderr
	}
}

// waitListening waits until something accepts TCP connections at addr, failing the test
// if p exits or 30 s pass first.
func waitListening(t *testing.T, p *testutil.Process, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if exited(p) || time.Now().After(deadline) {
			t.Fatalf("the gateway does not listen on its admin address %s (is admin.listen wired into serve?): %v\noutput:\n%s", addr, err, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
