package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestApplianceOverHTTP drives the real binary's --http listener and checks that what HTTP
// creates, gRPC sees, and that errors arrive as Connect JSON with the matching status.
func TestApplianceOverHTTP(t *testing.T) {
	dir := t.TempDir()
	endpoint := "unix://" + filepath.Join(dir, "csi.sock")
	addr := testutil.FreeAddr(t)
	testutil.Start(t, "appliance", "--data", filepath.Join(dir, "data"), "--endpoint", endpoint, "--http", addr)
	ctl := csi.NewControllerClient(testutil.Dial(t, endpoint))

	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: body %q is not JSON: %v", path, b, err)
		}
		return resp.StatusCode, out
	}

	code, out := post("/csi.v1.Controller/CreateVolume", `{"name":"web","capacityRange":{"requiredBytes":"8388608"},
		"volumeCapabilities":[{"mount":{"fsType":"ext4"},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}]}`)
	if code != 200 {
		t.Fatalf("CreateVolume over HTTP: %d %v", code, out)
	}
	id := out["volume"].(map[string]any)["volumeId"].(string)
	got, err := ctl.ControllerGetVolume(context.Background(), &csi.ControllerGetVolumeRequest{VolumeId: id})
	if err != nil || got.GetVolume().GetCapacityBytes() != 8<<20 {
		t.Fatalf("the volume created over HTTP, seen over gRPC: %v %v", err, got)
	}

	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/csi.v1.Controller/ControllerGetVolume", `{"volumeId":"vol-nope"}`, 404, "not_found"},
		{"/csi.v1.Controller/CreateVolume", `{"name":"web","capacityRange":{"requiredBytes":"99999999"},"volumeCapabilities":[{"mount":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}]}`, 409, "already_exists"},
		{"/csi.v1.Controller/CreateVolume", `{"name":`, 400, "invalid_argument"},
		{"/csi.v1.Controller/NoSuchMethod", `{}`, 404, "unimplemented"},
		{"/csi.v1.Controller/DeleteVolume", `{"volumeId":"vol-nope"}`, 200, ""},
	} {
		status, body := post(tc.path, tc.body)
		if status != tc.status || (tc.code != "" && body["code"] != tc.code) {
			t.Errorf("%s %s: %d %v, want %d %s", tc.path, tc.body, status, body, tc.status, tc.code)
		}
		if tc.code != "" && body["message"] == "" {
			t.Errorf("%s: error without a message", tc.path)
		}
	}
}

// TestApplianceStopsCleanly sends SIGTERM and checks the process exits 0 and removes its socket.
func TestApplianceStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	p := testutil.Start(t, "appliance", "--data", filepath.Join(dir, "data"), "--endpoint", "unix://"+sock)
	testutil.Dial(t, "unix://"+sock)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode: %v %v, want 0660", err, fi.Mode().Perm())
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(10 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Output())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket still there after SIGTERM: %v", err)
	}
}
