package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestV0UnpublishNotFoundIsOKRecorded: a v1 caller's ControllerUnpublishVolume of a volume a
// v0 driver does not know is OK (v0's NOT_FOUND there means the volume does not exist, which
// v1 answers OK), and the gateway records the driver's own NOT_FOUND beside it, as it records
// its repairs: backend_code NotFound, repairs code, in the call's log line.
func TestV0UnpublishNotFoundIsOKRecorded(t *testing.T) {
	bin := csiTestV0(t, v0MockDriverEnv, "v0-mock-driver")
	dir := t.TempDir()
	mockSocket := filepath.Join(dir, "mock.sock")
	testutil.StartCommand(t, "env", "CSI_ENDPOINT="+mockSocket, bin)
	waitV0Probe(t, mockSocket)
	gw := startGatewayWith(t, dir, fmt.Sprintf(`backends:
  legacy: {type: grpc, target: "unix://%s", csiVersion: v0}
routes:
  - {methods: ["*"], backend: legacy}
`, mockSocket))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := csi.NewControllerClient(gw.Conn).ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{
		VolumeId: "no-such-volume", NodeId: "io.kubernetes.storage.mock"})
	if err != nil {
		t.Fatalf("ControllerUnpublishVolume of a volume the v0 driver does not know: %v, want OK", err)
	}
	var line struct {
		Msg, Method, Code, Repairs string
		BackendCode                string `json:"backend_code"`
	}
	waitOutput(t, gw.Process, `"method":"ControllerUnpublishVolume"`, 10*time.Second)
	for _, l := range strings.Split(gw.Output(), "\n") {
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "call" && line.Method == "ControllerUnpublishVolume" {
			break
		}
	}
	if line.Code != "OK" || line.BackendCode != "NotFound" || line.Repairs != "code" {
		t.Errorf("the call's log line: code %q backend_code %q repairs %q; want OK, NotFound, code", line.Code, line.BackendCode, line.Repairs)
	}
}
