package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestApplianceSurvivesKill9 kills the real appliance with SIGKILL in the middle of bursts of
// CreateVolume and CreateSnapshot calls, restarts it, and retries every name. Every name must
// then exist exactly once, every ID acknowledged before the kill must be the one returned after
// it, and the data directory must hold exactly the images the state names: no duplicate, no
// orphan, nothing lost.
func TestApplianceSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	endpoint := "unix://" + filepath.Join(dir, "csi.sock")
	start := func() (*testutil.Process, *grpc.ClientConn) {
		p := testutil.Start(t, "appliance", "--data", data, "--endpoint", endpoint)
		return p, testutil.Dial(t, endpoint)
	}

	first, conn := start()
	source := mustCreateVolume(t, csi.NewControllerClient(conn), "crash-source")
	first.Kill()
	conn.Close()

	// Each round, workers create volumes and snapshots back to back until the appliance is
	// killed under them, so calls are in flight at every kill.
	const rounds, workers = 3, 8
	acked := map[string]string{} // name -> ID acknowledged before a kill
	var mu sync.Mutex
	var names []string
	for round := range rounds {
		p, conn := start()
		ctl := csi.NewControllerClient(conn)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					name := fmt.Sprintf("r%d-w%d-%04d", round, w, i)
					mu.Lock()
					names = append(names, name)
					mu.Unlock()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					id, err := create(ctx, ctl, name, source)
					cancel()
					if err != nil {
						return // the appliance is gone
					}
					mu.Lock()
					acked[name] = id
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(100+50*round) * time.Millisecond)
		p.Kill()
		wg.Wait()
		conn.Close()
	}
	if len(acked) == len(names) {
		t.Fatal("every call was answered before its kill: the test interrupted nothing")
	}

	_, conn = start()
	ctl := csi.NewControllerClient(conn)
	ids := map[string]bool{}
	for _, name := range names {
		id, err := create(context.Background(), ctl, name, source)
		if err != nil {
			t.Fatalf("retry of %s after restart: %v", name, err)
		}
		if want, ok := acked[name]; ok && want != id {
			t.Errorf("%s: acknowledged as %s before the kill, %s after", name, want, id)
		}
		if ids[id] {
			t.Errorf("%s: ID %s returned for two names", name, id)
		}
		ids[id] = true
	}

	vols, err := ctl.ListVolumes(context.Background(), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := ctl.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantVols, wantSnaps := 1+countPrefix(names, "vol"), countPrefix(names, "snap")
	if got := len(vols.GetEntries()); got != wantVols {
		t.Errorf("ListVolumes: %d volumes, want %d (the source and one per volume name)", got, wantVols)
	}
	if got := len(snaps.GetEntries()); got != wantSnaps {
		t.Errorf("ListSnapshots: %d snapshots, want %d", got, wantSnaps)
	}
	assertImages(t, filepath.Join(data, "volumes"), wantVols)
	assertImages(t, filepath.Join(data, "snapshots"), wantSnaps)
	t.Logf("%d names over %d kills, %d acknowledged before a kill, %d cut off; after restart: %d volumes, %d snapshots",
		len(names), rounds, len(acked), len(names)-len(acked), len(vols.GetEntries()), len(snaps.GetEntries()))
}

// create makes a volume for names ending in an even number and a snapshot of source for odd
// ones, so kills land in both kinds of call. Names are prefixed with their kind.
func create(ctx context.Context, ctl csi.ControllerClient, name, source string) (string, error) {
	if kindOf(name) == "vol" {
		resp, err := ctl.CreateVolume(ctx, volumeRequest("vol-"+name))
		return resp.GetVolume().GetVolumeId(), err
	}
	resp, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-" + name, SourceVolumeId: source})
	return resp.GetSnapshot().GetSnapshotId(), err
}

func kindOf(name string) string {
	if (name[len(name)-1]-'0')%2 == 0 {
		return "vol"
	}
	return "snap"
}

func countPrefix(names []string, kind string) int {
	n := 0
	for _, name := range names {
		if kindOf(name) == kind {
			n++
		}
	}
	return n
}

func volumeRequest(name string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:          name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
}

func mustCreateVolume(t *testing.T, ctl csi.ControllerClient, name string) string {
	t.Helper()
	resp, err := ctl.CreateVolume(context.Background(), volumeRequest(name))
	if err != nil {
		t.Fatalf("CreateVolume %s: %v", name, err)
	}
	return resp.GetVolume().GetVolumeId()
}

// assertImages checks that dir holds exactly want image files and nothing else.
func assertImages(t *testing.T, dir string, want int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var stray []string
	images := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".img") {
			images++
		} else {
			stray = append(stray, e.Name())
		}
	}
	if images != want || len(stray) > 0 {
		t.Errorf("%s: %d images (want %d), other files %v", dir, images, want, stray)
	}
}
