package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// v0MockDriverEnv and v0SanityEnv name csi-test v0.3.5's v0 mock driver and its v0 sanity
// suite (a ginkgo test binary); make test builds both with test/orchestrators/build-components.sh
// outside the gateway's module and sets them.
const (
	v0MockDriverEnv = "CSIGWTEST_V0_MOCK_DRIVER"
	v0SanityEnv     = "CSIGWTEST_V0_SANITY"
)

// v0MockSecrets are the secrets csi-test v0.3.5's mock driver demands with CSI_ENABLE_CREDS
// (mock/mocksecret.yaml): a sanity run passes only if every one reaches the driver intact.
const v0MockSecrets = `CreateVolumeSecret: {secretKey: secretval1}
DeleteVolumeSecret: {secretKey: secretval2}
ControllerPublishVolumeSecret: {secretKey: secretval3}
ControllerUnpublishVolumeSecret: {secretKey: secretval4}
NodeStageVolumeSecret: {secretKey: secretval5}
NodePublishVolumeSecret: {secretKey: secretval6}
CreateSnapshotSecret: {secretKey: secretval7}
DeleteSnapshotSecret: {secretKey: secretval8}
`

// v0SanityCounts reads the summary of csi-test v0.3.5's ginkgo v1 run, which ends its counts
// on the line after "Ran N of M Specs".
var v0SanityCounts = regexp.MustCompile(`(?s)Ran (\d+) of (\d+) Specs.*?(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)

// TestV0Sanity runs csi-test v0.3.5's v0 sanity suite against its v0 mock driver (with
// credentials on) directly, then through the real gateway binary (validation: enforce, debug
// log) under repair: spec (a grpc backend's default) and plugin (every row of v0's error
// table): 0 failed, the same counts every way, and no secret in the gateway's log.
func TestV0Sanity(t *testing.T) {
	mockBin, sanityBin := os.Getenv(v0MockDriverEnv), os.Getenv(v0SanityEnv)
	if mockBin == "" || sanityBin == "" {
		t.Skipf("SKIPPED, NEEDS CSI-TEST v0.3.5: $%s and $%s are not set. make test builds and sets them; by hand: "+
			"test/orchestrators/build-components.sh v0-mock-driver v0-sanity and export each --path", v0MockDriverEnv, v0SanityEnv)
	}
	counts := map[string]string{}
	for _, via := range []string{"direct", "spec", "plugin"} {
		t.Run(via, func(t *testing.T) {
			dir := t.TempDir()
			mockSock := filepath.Join(dir, "mock.sock")
			testutil.StartCommand(t, "env", "CSI_ENDPOINT="+mockSock, "CSI_ENABLE_CREDS=true", mockBin)
			waitV0Probe(t, mockSock)
			sock := mockSock
			var gw *gatewayProc
			if via != "direct" {
				gw = startGatewayWith(t, dir, fmt.Sprintf(`backends:
  v0mock: {type: grpc, target: "unix://%s", repair: %s}
routes:
  - {methods: ["*"], backend: v0mock}
validation: enforce
logging: {level: debug}
`, mockSock, via))
				sock = gw.Socket
			}
			secrets := writeFile(t, filepath.Join(dir, "secrets.yaml"), v0MockSecrets)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, sanityBin, "-csi.endpoint="+sock, "-csi.secrets="+secrets,
				"-csi.mountdir="+filepath.Join(dir, "target"), "-csi.stagingdir="+filepath.Join(dir, "staging"), "-ginkgo.noColor")
			out, err := cmd.CombinedOutput()
			m := v0SanityCounts.FindStringSubmatch(string(out))
			if err != nil || m == nil || m[4] != "0" {
				t.Fatalf("v0 sanity %s: %v\n%s", via, err, out)
			}
			counts[via] = fmt.Sprintf("ran %s of %s, %s passed, %s failed, %s pending, %s skipped", m[1], m[2], m[3], m[4], m[5], m[6])
			t.Logf("v0 sanity %s: %s", via, counts[via])
			if gw != nil {
				log := gw.Output()
				if strings.Contains(log, "secretval") {
					t.Errorf("the gateway's debug log holds a secret of the sanity run")
				}
				if !strings.Contains(log, `"method":"CreateVolume"`) || !strings.Contains(log, "***stripped***") {
					t.Errorf("the gateway's debug log does not show the v0 calls, redacted")
				}
			}
		})
	}
	for _, repair := range []string{"spec", "plugin"} {
		if counts[repair] != counts["direct"] {
			t.Errorf("v0 sanity through the gateway (repair: %s): %s; direct: %s", repair, counts[repair], counts["direct"])
		}
	}
}

// waitV0Probe waits until the v0 driver at sock answers csi.v0.Identity/Probe, for 20 s at most.
func waitV0Probe(t *testing.T, sock string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		_, err := csiv0.NewIdentityClient(conn).Probe(ctx, &csiv0.ProbeRequest{}, grpc.WaitForReady(true))
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the v0 driver at %s did not answer Probe within 20s: %v", sock, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
