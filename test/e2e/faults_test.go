package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// The fault tests run the real gateway binary in front of the real appliance binary, over each
// remote backend path, under a mixed CSI load, and break the appliance (SIGKILL) or stop the
// gateway (SIGTERM) in the middle of it.
const (
	faultWorkers  = 6
	faultDeadline = 5 * time.Second // of every call of the load
	// faultSlack is how much longer than its deadline a call may take to come back before it
	// counts as hung: generous, for a loaded machine.
	faultSlack = 10 * time.Second
	faultKills = 4
)

// faultBackend returns the backends: and routes: of a gateway in front of a, over path. The
// backend's circuit breaker cools down for 1 s, at most 2 s, instead of the default 5 s (up
// to 60 s): it still opens at every kill and fails calls fast, but the gateway serves again
// soon enough after each restart for four of them to fit the time budget.
func faultBackend(path string, a *faultAppliance) string {
	const breaker = "circuitBreaker: {coolDown: 1s, maxCoolDown: 2s}"
	be := fmt.Sprintf("{type: grpc, target: %q, %s}", a.endpoint, breaker)
	if path == "rest" {
		be = fmt.Sprintf("{type: rest, urls: [%q], %s}", "http://"+a.httpAddr, breaker)
	}
	return fmt.Sprintf("backends:\n  appliance: %s\nroutes:\n  - {methods: [\"*\"], backend: appliance}\n", be)
}

// TestFaultApplianceKilledUnderLoad kills the appliance with SIGKILL four times, at random
// moments, under a mixed load through the gateway (grpc and rest backends), and restarts it on
// the same data directory, socket and port. Every call must come back, OK or with a transient
// code (UNAVAILABLE, DEADLINE_EXCEEDED); every OK must hold on the appliance; and once the
// failed calls are retried as a CO would, the appliance must hold exactly the volumes and
// snapshots the test asked for: one per name, no orphans, an image per volume and no other.
// The gateway must stay up throughout.
//
// The two paths run in parallel: each spends much of its time waiting for the gateway to
// serve again after a restart (its circuit breaker holds calls off for a cool-down).
func TestFaultApplianceKilledUnderLoad(t *testing.T) {
	for _, path := range []string{"grpc", "rest"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			testApplianceKilledUnderLoad(t, path)
		})
	}
}

func testApplianceKilledUnderLoad(t *testing.T, path string) {
	dir := t.TempDir()
	app := startFaultAppliance(t, dir, path == "rest")
	gw := startGatewayWith(t, dir, faultBackend(path, app))
	output := func() string {
		return fmt.Sprintf("gateway output:\n%s\nappliance output (start %d):\n%s", gw.Output(), app.starts, app.proc.Output())
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	load := startFaultLoad(gw.Conn, "f"+path, faultWorkers, faultDeadline, seed)
	defer load.halt(0) // on a t.Fatal: stop the workers (the processes die at cleanup)

	// Each round kills the appliance 200–600 ms after the load got an OK from it, so calls are
	// in flight, and restarts it after 100–300 ms. How long the gateway takes to serve again
	// once the appliance answers is logged.
	var outstanding int64
	var recovery []string
	load.waitOK(t, 0, 30*time.Second, output)
	for range faultKills {
		time.Sleep(time.Duration(200+rnd.IntN(400)) * time.Millisecond)
		outstanding += load.issued.Load() - load.answered.Load()
		app.kill()
		time.Sleep(time.Duration(100+rnd.IntN(200)) * time.Millisecond)
		app.start()
		if exited(gw.Process) {
			t.Fatalf("the gateway exited while the appliance was down\n%s", output())
		}
		recovery = append(recovery, waitServing(t, gw.Conn, output).Round(time.Millisecond).String())
		load.waitOK(t, load.oks.Load(), 30*time.Second, output)
	}
	loadEnded := time.Now()

	// 1. Every call came back, within its deadline and a generous slack.
	if !load.halt(faultDeadline + faultSlack) {
		t.Fatalf("calls still unanswered %v after the load stopped: %d issued, %d answered\n%s",
			faultDeadline+faultSlack, load.issued.Load(), load.answered.Load(), output())
	}
	calls := load.recorded()
	if n := int64(len(calls)); n != load.issued.Load() {
		t.Errorf("%d calls issued, %d answered", load.issued.Load(), n)
	}
	for _, c := range calls {
		if c.Took > faultDeadline+faultSlack {
			t.Errorf("%s %s%s took %v, past its %v deadline", c.Op, c.Name, c.VolID, c.Took, faultDeadline)
		}
	}

	// 4. The failures were transient ones.
	figures := countCodes(calls)
	var wrong []string
	for _, c := range calls {
		if c.Code != codes.OK && c.Code != codes.Unavailable && c.Code != codes.DeadlineExceeded {
			wrong = append(wrong, fmt.Sprintf("%s %s%s: %s %q", c.Op, c.Name, c.VolID, c.Code, c.Msg))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d calls failed with a code other than UNAVAILABLE or DEADLINE_EXCEEDED during the outages:\n%s",
			len(wrong), strings.Join(wrong[:min(len(wrong), 20)], "\n"))
	}
	// The kills must have cut calls off: calls failed, or the gateway retried them (the REST
	// backend retries within the caller's deadline, so its callers may see no failure at all).
	retried := 0
	for _, lines := range callLines(t, gw.Output()) {
		for _, l := range lines {
			if n, _ := l["attempts"].(float64); n > 1 {
				retried++
			}
		}
	}
	if figures.ok == figures.calls && retried == 0 {
		t.Errorf("every call got OK at its first attempt: the kills interrupted nothing")
	}

	// 2. Every OK holds on the appliance, asked directly.
	created := map[string]string{} // name -> ID, of volumes created with an OK answer
	deletedOK := map[string]bool{} // IDs of volumes whose DeleteVolume got OK
	deleteFailed := map[string]bool{}
	snapshots := map[string]string{} // name -> ID, of snapshots created with an OK answer
	var failedCreates, failedSnaps []faultCall
	published := map[string]bool{} // volumes the load published or unpublished
	for _, c := range calls {
		switch {
		case c.Op == opCreateVolume && c.Code == codes.OK:
			created[c.Name] = c.VolID
		case c.Op == opCreateVolume:
			failedCreates = append(failedCreates, c)
		case c.Op == opDeleteVolume && c.Code == codes.OK:
			deletedOK[c.VolID] = true
		case c.Op == opDeleteVolume:
			deleteFailed[c.VolID] = true
		case c.Op == opSnapshot && c.Code == codes.OK:
			snapshots[c.Name] = c.SnapID
		case c.Op == opSnapshot:
			failedSnaps = append(failedSnaps, c)
		case c.Op == opPublish || c.Op == opUnpublish:
			published[c.VolID] = true
		}
	}
	ctl := app.controller()
	records := readApplianceRecords(t, app.data)
	for name, id := range created {
		_, err := ctl.ControllerGetVolume(context.Background(), &csi.ControllerGetVolumeRequest{VolumeId: id})
		switch {
		case deletedOK[id]:
			checkStatus(t, fmt.Sprintf("the appliance's ControllerGetVolume of %s (%s), deleted with an OK", id, name), err, codes.NotFound)
		case deleteFailed[id]:
			// Deleted or not: it depends on where the kill fell. Settled below.
		case err != nil:
			t.Errorf("%s was created with an OK as %s, but the appliance does not have it: %v", name, id, err)
		case records.Volumes[id].Name != name:
			t.Errorf("%s was created with an OK as %s, but the appliance holds %s under the name %q", name, id, id, records.Volumes[id].Name)
		}
	}
	for name, id := range snapshots {
		if s, ok := records.Snapshots[id]; !ok || s.Name != name {
			t.Errorf("snapshot %s was created with an OK as %s, but the appliance holds %+v under that ID", name, id, s)
		}
	}
	// Calls that failed at the caller but were done on the appliance: what a CO's retry must
	// find, not make again.
	ghosts, byName := 0, records.volumeIDsByName()
	for _, c := range failedCreates {
		if _, ok := byName[c.Name]; ok {
			ghosts++
		}
	}

	// 3. Retry, as a CO would, every call that did not get OK, through the gateway.
	gctl := csi.NewControllerClient(gw.Conn)
	retries := 0
	for _, c := range failedCreates {
		id, n := retryUntilOK(t, "CreateVolume "+c.Name, func(ctx context.Context) (string, error) {
			resp, err := gctl.CreateVolume(ctx, volumeRequest(c.Name))
			return resp.GetVolume().GetVolumeId(), err
		})
		retries += n
		if id != "" {
			created[c.Name] = id
		}
		if ids := byName[c.Name]; id != "" && len(ids) == 1 && ids[0] != id {
			t.Errorf("CreateVolume %s failed at the caller but was done on the appliance as %s; its retry returned %s", c.Name, ids[0], id)
		}
	}
	// A CO asks again for volumes it already has, too (after its own restart, say): up to 30
	// of those created with an OK during the load, and not deleted, must come back as they are.
	var again []string
	for name, id := range created {
		if !deletedOK[id] && !deleteFailed[id] && !slices.ContainsFunc(failedCreates, func(c faultCall) bool { return c.Name == name }) {
			again = append(again, name)
		}
	}
	sort.Strings(again)
	rnd.Shuffle(len(again), func(i, j int) { again[i], again[j] = again[j], again[i] })
	for _, name := range again[:min(len(again), 30)] {
		id, n := retryUntilOK(t, "CreateVolume "+name+" again", func(ctx context.Context) (string, error) {
			resp, err := gctl.CreateVolume(ctx, volumeRequest(name))
			return resp.GetVolume().GetVolumeId(), err
		})
		retries += n
		if id != "" && id != created[name] {
			t.Errorf("CreateVolume %s, asked again after the outages: %s, but it was created as %s", name, id, created[name])
		}
	}
	for _, c := range failedSnaps {
		id, n := retryUntilOK(t, "CreateSnapshot "+c.Name, func(ctx context.Context) (string, error) {
			resp, err := gctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: c.Name, SourceVolumeId: c.VolID})
			return resp.GetSnapshot().GetSnapshotId(), err
		})
		retries += n
		if id != "" {
			snapshots[c.Name] = id
		}
	}
	for id := range deleteFailed {
		if deletedOK[id] {
			continue
		}
		_, n := retryUntilOK(t, "DeleteVolume "+id, func(ctx context.Context) (string, error) {
			_, err := gctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
			return "", err
		})
		retries += n
		deletedOK[id] = true
	}
	for id := range published {
		_, n := retryUntilOK(t, "ControllerUnpublishVolume "+id, func(ctx context.Context) (string, error) {
			_, err := gctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: load.node})
			return "", err
		})
		retries += n
	}

	// The appliance now holds exactly what should exist: every name created and not deleted,
	// once, under the ID the gateway returned; every snapshot, once; no publication left; and
	// one image per volume and per snapshot.
	want := map[string]string{}
	for name, id := range created {
		if !deletedOK[id] {
			want[name] = id
		}
	}
	records = readApplianceRecords(t, app.data)
	got := records.volumeIDsByName()
	for name, ids := range got {
		switch {
		case len(ids) > 1:
			t.Errorf("volume name %s is held %d times: %v", name, len(ids), ids)
		case want[name] == "":
			t.Errorf("the appliance holds volume %s (%s), which should not exist (an orphan, or deleted with an OK)", name, ids[0])
		case want[name] != ids[0]:
			t.Errorf("volume %s is %s on the appliance, but the gateway returned %s", name, ids[0], want[name])
		}
	}
	for name, id := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("volume %s (%s) should exist, but the appliance does not hold it", name, id)
		}
	}
	list, err := ctl.ListVolumes(context.Background(), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatalf("the appliance's ListVolumes: %v", err)
	}
	var listed []string
	for _, e := range list.GetEntries() {
		listed = append(listed, e.GetVolume().GetVolumeId())
		if nodes := e.GetStatus().GetPublishedNodeIds(); len(nodes) > 0 {
			t.Errorf("volume %s is still published to %v after every unpublish got OK", e.GetVolume().GetVolumeId(), nodes)
		}
	}
	var wantIDs []string
	for _, id := range want {
		wantIDs = append(wantIDs, id)
	}
	sort.Strings(listed)
	sort.Strings(wantIDs)
	if !slices.Equal(listed, wantIDs) {
		t.Errorf("the appliance's ListVolumes has %d volumes, want %d; not listed: %v; listed but not wanted: %v",
			len(listed), len(wantIDs), without(wantIDs, listed), without(listed, wantIDs))
	}
	gotSnaps := records.snapshotIDsByName()
	if len(records.Snapshots) != len(snapshots) {
		t.Errorf("the appliance holds %d snapshots, want %d", len(records.Snapshots), len(snapshots))
	}
	for name, id := range snapshots {
		if ids := gotSnaps[name]; len(ids) != 1 || ids[0] != id {
			t.Errorf("snapshot %s: the appliance holds %v, want [%s]", name, ids, id)
		}
	}
	assertImages(t, filepath.Join(app.data, "volumes"), len(want))
	assertImages(t, filepath.Join(app.data, "snapshots"), len(snapshots))

	// 5. The gateway stayed up, and did not panic.
	if exited(gw.Process) {
		t.Errorf("the gateway exited\n%s", output())
	}
	if strings.Contains(gw.Output(), "panic") {
		t.Errorf("the gateway logged a panic\n%s", output())
	}

	t.Logf("%s backend, %d kills (%d calls outstanding at the kills; the gateway served again %v after each restart): %s; "+
		"%d calls took more than one attempt at the gateway", path, faultKills, outstanding, recovery, figures, retried)
	for _, op := range []string{opCreateVolume, opDeleteVolume, opSnapshot, opPublish, opUnpublish, opList} {
		var of []faultCall
		for _, c := range calls {
			if c.Op == op {
				of = append(of, c)
			}
		}
		t.Logf("  %-26s %s", op, countCodes(of))
	}
	t.Logf("after the load (%v): %d of %d failed CreateVolume calls had been done on the appliance; %d CO retries (attempts) "+
		"for %d creates, %d snapshots, %d deletes, %d unpublishes; the appliance holds %d volumes, %d snapshots",
		time.Since(loadEnded).Round(time.Millisecond), ghosts, len(failedCreates), retries, len(failedCreates), len(failedSnaps),
		len(deleteFailed), len(published), len(records.Volumes), len(records.Snapshots))
}

// TestFaultGatewaySIGTERMUnderLoad sends SIGTERM to the gateway (shutdown.grace 10s) while a
// mixed load runs through it. To have calls certainly in flight at the signal, the appliance
// is frozen (SIGSTOP) until the gateway counts one call per worker in flight
// (csigw_calls_in_flight), then thawed once the gateway has stopped accepting connections.
// Every call that started before the signal completes OK; none is cut off; calls after it
// are refused with UNAVAILABLE; the gateway exits 0.
func TestFaultGatewaySIGTERMUnderLoad(t *testing.T) {
	for _, path := range []string{"grpc", "rest"} {
		t.Run(path, func(t *testing.T) { testGatewaySIGTERMUnderLoad(t, path) })
	}
}

func testGatewaySIGTERMUnderLoad(t *testing.T, path string) {
	dir := t.TempDir()
	app := startFaultAppliance(t, dir, path == "rest")
	admin := testutil.FreeAddr(t)
	gw := startGatewayWith(t, dir, faultBackend(path, app)+fmt.Sprintf("admin: {listen: %q}\nshutdown: {grace: 10s}\n", admin))
	output := func() string {
		return fmt.Sprintf("gateway output:\n%s\nappliance output:\n%s", gw.Output(), app.proc.Output())
	}

	// The calls wait on a frozen appliance: their deadline is longer than any wait here.
	seed := uint64(time.Now().UnixNano())
	load := startFaultLoad(gw.Conn, "t"+path, faultWorkers, time.Minute, seed)
	defer load.halt(0)
	load.waitOK(t, 20, 30*time.Second, output)

	if err := app.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer app.proc.Signal(syscall.SIGCONT)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := metricSeries(scrapeMetrics(t, "http://"+admin+"/metrics"), "csigw_calls_in_flight", map[string]string{})
		if m.GetGauge().GetValue() == faultWorkers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("csigw_calls_in_flight is %v after 30s with the appliance stopped, want %d\n%s",
				m.GetGauge().GetValue(), faultWorkers, output())
		}
		time.Sleep(10 * time.Millisecond)
	}

	signalled := time.Now()
	if err := gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, gw, 20*time.Second)
	if err := app.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := gw.Wait(30 * time.Second); err != nil {
		t.Fatalf("the gateway after SIGTERM: %v\n%s", err, output())
	}
	exitedAfter := time.Since(signalled)
	if !load.halt(time.Minute) {
		t.Fatalf("calls still unanswered a minute after the gateway exited\n%s", output())
	}

	var before, inFlight, after []faultCall
	for _, c := range load.recorded() {
		switch {
		case c.Start.Before(signalled) && c.Start.Add(c.Took).After(signalled):
			inFlight = append(inFlight, c)
			before = append(before, c)
		case c.Start.Before(signalled):
			before = append(before, c)
		default:
			after = append(after, c)
		}
	}
	for _, c := range before {
		if c.Code != codes.OK {
			t.Errorf("%s %s%s, started before SIGTERM: %s %q; want OK", c.Op, c.Name, c.VolID, c.Code, c.Msg)
		}
	}
	if len(inFlight) != faultWorkers {
		t.Errorf("%d calls were in flight at SIGTERM, want %d (one per worker)", len(inFlight), faultWorkers)
	}
	for _, c := range after {
		if c.Code != codes.OK && c.Code != codes.Unavailable {
			t.Errorf("%s %s%s, started after SIGTERM: %s %q; want UNAVAILABLE (or OK)", c.Op, c.Name, c.VolID, c.Code, c.Msg)
		}
	}
	if strings.Contains(gw.Output(), "grace period over") {
		t.Errorf("the gateway cut calls off\n%s", output())
	}
	var ops []string
	for _, c := range inFlight {
		ops = append(ops, c.Op)
	}
	sort.Strings(ops)
	t.Logf("%s backend: %d calls before SIGTERM, all OK, %d of them in flight at the signal (%s); after it %s; exit 0 after %v",
		path, len(before), len(inFlight), strings.Join(ops, ", "), countCodes(after), exitedAfter.Round(time.Millisecond))
}

// without returns the elements of a that are not in b.
func without(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
