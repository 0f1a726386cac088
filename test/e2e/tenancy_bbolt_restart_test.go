package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestTenancyBboltRestartKeepsCreateHolds kills the single central gateway (bbolt ledger)
// with SIGKILL while a create is in flight at a backend that completes it anyway (the racy
// driver), under a quota of 2 volumes with 1 used, and restarts it at once. The create's hold
// is in the ledger file: `ledger holds` lists it while the gateway is down (and refuses the
// file while it runs), another name is RESOURCE_EXHAUSTED, so the backend never holds more
// than the quota (before, the hold died with the process, that create was admitted and the
// backend held 3), and the retry of the name takes the hold over and records the volume the
// dead call created: no duplicate, 2 volumes counted, no hold left.
func TestTenancyBboltRestartKeepsCreateHolds(t *testing.T) {
	dir := t.TempDir()
	driver, endpoint := startRacyDriver(t, dir, 3*time.Second)
	sc := newSharedController(t, dir)
	sc.writeCentralConfig(t, endpoint, []string{"blue"}, "    - {name: blue, maxVolumes: 2}", "", "", false)
	sc.startCentral(t)
	blue := csi.NewControllerClient(sc.dialCentral(t, "blue"))
	ledgerFile := "bbolt:" + filepath.Join(dir, "tenancy.db")
	mount := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	create := func(ctx context.Context, name string) (*csi.CreateVolumeResponse, error) {
		return blue.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: mount,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20}}, grpc.WaitForReady(true))
	}
	if _, err := create(callCtx(t), "pvc-1"); err != nil {
		t.Fatalf("CreateVolume pvc-1: %v", err)
	}

	// pvc-2 in flight at the backend (its deadline 10 s away) when the gateway is killed.
	inFlight, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	killed := make(chan error, 1)
	go func() {
		_, err := create(inFlight, "pvc-2")
		killed <- err
	}()
	pid := int32(sc.central.PID())
	for wait := time.Now().Add(30 * time.Second); !driver.creating(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("pvc-2's create did not reach the backend within 30 s")
		}
	}
	sc.central.Kill()
	if err := <-killed; err == nil {
		t.Fatal("pvc-2's create answered OK from a killed gateway")
	}

	out := runLedgerCommand(t, false, "holds", "--store", ledgerFile, "-o", "json")
	var holds []struct {
		Tenant, Name string
		Bytes        int64
	}
	if err := json.Unmarshal([]byte(out), &holds); err != nil || len(holds) != 1 || holds[0].Tenant != "blue" || holds[0].Name != "blue.pvc-2" || holds[0].Bytes != 64<<20 {
		t.Errorf("ledger holds with the gateway down: %v\n%s\nwant blue.pvc-2's hold of 64 MiB", err, out)
	}
	out = runLedgerCommand(t, true, "release-hold", "--store", ledgerFile, "--tenant", "blue", "--name", "blue.pvc-9")
	if !strings.Contains(out, `no such create hold of the name "blue.pvc-9"`) {
		t.Errorf("release-hold of a name with no hold:\n%s\nwant refused", out)
	}

	sc.startCentral(t)
	out = runLedgerCommand(t, true, "holds", "--store", ledgerFile)
	if !strings.Contains(out, "stop the central gateway first") {
		t.Errorf("ledger holds while the gateway runs:\n%s\nwant refused, saying to stop it", out)
	}
	overQuota := func(when string) {
		t.Helper()
		_, err := create(callCtx(t), "pvc-3")
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "has 2 volumes") {
			t.Errorf("pvc-3 %s: %v; want RESOURCE_EXHAUSTED, 2 volumes counted", when, err)
		}
	}
	overQuota("after the restart, with pvc-2's create in flight at the backend")

	// The retry waits for the dead call's deadline (its lock is in the file too), then finds
	// the volume that call created and records it, taking the hold over.
	retryCtx, cancelRetry := context.WithTimeout(t.Context(), time.Minute)
	defer cancelRetry()
	retried, err := create(retryCtx, "pvc-2")
	if err != nil {
		t.Fatalf("the retry of pvc-2: %v", err)
	}
	overQuota("after pvc-2's retry recorded it")
	driver.mu.Lock()
	ids, duplicates, most := driver.volumes["blue.pvc-2"], driver.duplicates, driver.maxHeld["blue"]
	driver.mu.Unlock()
	if len(ids) != 1 || retried.GetVolume().GetVolumeId() != "blue."+ids[0] || duplicates != 0 {
		t.Errorf("backend volumes of blue.pvc-2: %v (%d duplicates), the retry answered %s; want the dead call's one volume", ids, duplicates, retried.GetVolume().GetVolumeId())
	}
	if most != 2 {
		t.Errorf("the backend held at most %d of blue's volumes; want 2, its quota", most)
	}
	sc.central.Kill()
	if out := runLedgerCommand(t, false, "holds", "--store", ledgerFile, "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("ledger holds after the retry:\n%s\nwant none", out)
	}
}

// runLedgerCommand runs `csi-gateway ledger ARGS` and returns its output; it must succeed,
// or fail when wantFailure.
func runLedgerCommand(t *testing.T, wantFailure bool, args ...string) string {
	t.Helper()
	p := testutil.Start(t, append([]string{"ledger"}, args...)...)
	if err := p.Wait(2 * time.Minute); (err != nil) != wantFailure {
		t.Fatalf("ledger %s: %v (want a failure: %v)\n%s", strings.Join(args, " "), err, wantFailure, p.Output())
	}
	return p.Output()
}
