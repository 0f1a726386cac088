package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// tenancyDirEnv passes the shared controller's directory to the csi-sanity children.
const tenancyDirEnv = "CSIGWTEST_TENANCY_DIR"

// TestTwoTenantsSanity runs csi-sanity for two tenants at the same time, each through its
// own cluster gateway, into one central gateway in front of one appliance: both must pass as
// a lone run does. The appliance's per-node attach limit is off and its spec not run: both
// runs use the appliance's one node, which in a real fleet two clusters never share.
func TestTwoTenantsSanity(t *testing.T) {
	twoTenantsSanity(t, func(t *testing.T, dir string, tenants []string, tenantsYAML string) *sharedController {
		sc := startSharedController(t, dir, tenants, tenantsYAML, "", "", false)
		// Without tenancy.tokenKeyFile the listing tokens' key is the process's own, and
		// the log says what that means.
		waitOutput(t, sc.central, "tenancy.tokenKeyFile is not set", 10*time.Second)
		return sc
	})
}

// twoTenantsSanity runs csi-sanity for the tenants cluster-a and cluster-b at the same time,
// each through its cluster gateway at dir/TENANT.sock, into the shared controller that start
// builds in dir, and checks that nothing of either is left on the appliance.
func twoTenantsSanity(t *testing.T, start func(t *testing.T, dir string, tenants []string, tenantsYAML string) *sharedController) {
	tenants := []string{"cluster-a", "cluster-b"}
	testutil.SanityConcurrently(t, tenants, func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("csi-sanity's node specs mount volumes: run the tests as root")
		}
		dir := t.TempDir()
		sc := start(t, dir, tenants, "    - {name: cluster-a}\n    - {name: cluster-b}")
		t.Setenv(tenancyDirEnv, dir)
		t.Cleanup(func() {
			// Both suites clean up after themselves: nothing of either may be left.
			if n := len(listAll(t, sc.appliance)); n != 0 {
				t.Errorf("the appliance still has %d volumes after both runs", n)
			}
		})
	}, func(t *testing.T, tenant string) {
		dir := os.Getenv(tenancyDirEnv)
		cfg := testutil.ApplianceSanityConfig(filepath.Join(dir, tenant), "unix://"+filepath.Join(dir, tenant+".sock"), "mount")
		cfg.TestNodeVolumeAttachLimit = false
		cfg.TestVolumeParameters = map[string]string{"tier": "standard"}
		testutil.RunSanity(t, cfg)
	})
}

// listAll returns every volume ID the client at endpoint sees.
func listAll(t *testing.T, endpoint string) []string {
	t.Helper()
	ctl := csi.NewControllerClient(testutil.Dial(t, endpoint))
	var ids []string
	for token := ""; ; {
		resp, err := ctl.ListVolumes(callCtx(t), &csi.ListVolumesRequest{StartingToken: token})
		if err != nil {
			t.Fatalf("ListVolumes at %s: %v", endpoint, err)
		}
		for _, e := range resp.GetEntries() {
			ids = append(ids, e.GetVolume().GetVolumeId())
		}
		if token = resp.GetNextToken(); token == "" {
			return ids
		}
	}
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestTenantIsolation drives the shared controller as two clusters would, through the real
// binaries over mTLS: each cluster sees only its own objects, every RPC with the other's IDs
// is answered as for an absent object and changes nothing, quotas hold, method allow-lists
// hold, and the ledger survives a restart of the central gateway.
func TestTenantIsolation(t *testing.T) {
	dir := t.TempDir()
	sc := startSharedController(t, dir, []string{"blue", "green"},
		"    - {name: blue}\n    - {name: green, maxVolumes: 2, maxBytes: 268435456}",
		`    methods: ["/csi.v1.Identity/*", "/csi.v1.Controller/*"]`, "", true)
	blue := csi.NewControllerClient(testutil.Dial(t, sc.clusters["blue"]))
	green := csi.NewControllerClient(testutil.Dial(t, sc.clusters["green"]))
	ctx := callCtx(t)
	mount := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	create := func(ctl csi.ControllerClient, name string) *csi.Volume {
		t.Helper()
		resp, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: mount,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20}})
		if err != nil {
			t.Fatalf("CreateVolume %s: %v", name, err)
		}
		return resp.GetVolume()
	}

	// The same name in both clusters: two volumes, each scoped to its tenant.
	gv := create(green, "pvc-shared-name")
	bv := create(blue, "pvc-shared-name")
	if gv.GetVolumeId() == bv.GetVolumeId() || gv.GetVolumeId()[:6] != "green." || bv.GetVolumeId()[:5] != "blue." {
		t.Fatalf("volume IDs %q and %q: want distinct, scoped IDs", gv.GetVolumeId(), bv.GetVolumeId())
	}
	gs, err := green.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-green", SourceVolumeId: gv.GetVolumeId()})
	if err != nil {
		t.Fatalf("green CreateSnapshot: %v", err)
	}
	if _, err := green.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: gv.GetVolumeId(), NodeId: "node-1", VolumeCapability: mount[0]}); err != nil {
		t.Fatalf("green ControllerPublishVolume: %v", err)
	}
	truth := func() []string { return slices.Sorted(slices.Values(listAll(t, sc.appliance))) }
	before := truth()

	// Blue tries green's objects by green's IDs, by green's IDs re-prefixed as its own
	// (a forgery that names a real backend object), and by bare backend IDs.
	greenBackendVol := gv.GetVolumeId()[len("green."):]
	greenBackendSnap := gs.GetSnapshot().GetSnapshotId()[len("green."):]
	for _, ids := range []struct{ vol, snap string }{
		{gv.GetVolumeId(), gs.GetSnapshot().GetSnapshotId()},
		{"blue." + greenBackendVol, "blue." + greenBackendSnap},
		{greenBackendVol, greenBackendSnap},
	} {
		notFound := func(what string, err error) {
			t.Helper()
			if status.Code(err) != codes.NotFound {
				t.Errorf("blue %s with %q: %v, want NOT_FOUND", what, ids.vol, err)
			}
		}
		_, err := blue.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: ids.vol})
		notFound("ControllerGetVolume", err)
		_, err = blue.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: ids.vol, NodeId: "node-1", VolumeCapability: mount[0]})
		notFound("ControllerPublishVolume", err)
		// An absent volume is "safely regarded as unpublished" (CSI): OK, and nothing done;
		// green's publication is checked below.
		if _, err := blue.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: ids.vol}); err != nil {
			t.Errorf("blue ControllerUnpublishVolume (all nodes) %q: %v, want OK (as for an absent volume)", ids.vol, err)
		}
		_, err = blue.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: ids.vol, VolumeCapabilities: mount})
		notFound("ValidateVolumeCapabilities", err)
		_, err = blue.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: ids.vol, CapacityRange: &csi.CapacityRange{RequiredBytes: 128 << 20}})
		notFound("ControllerExpandVolume", err)
		_, err = blue.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "steal", SourceVolumeId: ids.vol})
		notFound("CreateSnapshot", err)
		_, err = blue.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "clone-steal", VolumeCapabilities: mount,
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: ids.snap}}}})
		notFound("CreateVolume from snapshot", err)
		if _, err := blue.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: ids.snap}); err != nil {
			t.Errorf("blue DeleteSnapshot %q: %v, want OK (as for an absent snapshot)", ids.snap, err)
		}
		if _, err := blue.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: ids.vol}); err != nil {
			t.Errorf("blue DeleteVolume %q: %v, want OK (as for an absent volume)", ids.vol, err)
		}
		if resp, err := blue.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: ids.snap}); err != nil || len(resp.GetEntries()) != 0 {
			t.Errorf("blue ListSnapshots by %q: %v entries, %v; want none", ids.snap, len(resp.GetEntries()), err)
		}
		if resp, err := blue.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: ids.vol}); err != nil || len(resp.GetEntries()) != 0 {
			t.Errorf("blue ListSnapshots by source %q: %v entries, %v; want none", ids.vol, len(resp.GetEntries()), err)
		}
	}
	if got := listAll(t, sc.clusters["blue"]); !slices.Equal(got, []string{bv.GetVolumeId()}) {
		t.Errorf("blue lists %v, want only its own %s", got, bv.GetVolumeId())
	}
	if resp, err := blue.ListSnapshots(ctx, &csi.ListSnapshotsRequest{}); err != nil || len(resp.GetEntries()) != 0 {
		t.Errorf("blue lists snapshots %v (%v), want none", resp.GetEntries(), err)
	}
	// Nothing of green's changed: its volume, snapshot and publication are all there.
	if after := truth(); !slices.Equal(after, before) {
		t.Errorf("the appliance's volumes changed under blue's attempts: %v, then %v", before, after)
	}
	got, err := green.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: gv.GetVolumeId()})
	if err != nil || !slices.Equal(got.GetStatus().GetPublishedNodeIds(), []string{"node-1"}) || got.GetVolume().GetCapacityBytes() != 64<<20 {
		t.Errorf("green's volume after blue's attempts: %v, %v; want it published to node-1 and 64 MiB", got, err)
	}
	if resp, err := green.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: gs.GetSnapshot().GetSnapshotId()}); err != nil || len(resp.GetEntries()) != 1 {
		t.Errorf("green's snapshot after blue's attempts: %v, %v", resp, err)
	}

	// Green's quotas: 2 volumes, 256 MiB. Ten identical creates of a second volume of 128 MiB
	// in flight together are one create: all ten get the volume (each holding the quota would
	// refuse all but one). They go straight to the central gateway: green's cluster gateway
	// would join them itself.
	centralGreen := csi.NewControllerClient(sc.dialCentral(t, "green"))
	second := &csi.CreateVolumeRequest{Name: "pvc-green-2", VolumeCapabilities: mount, CapacityRange: &csi.CapacityRange{RequiredBytes: 128 << 20}}
	secondIDs := make([]string, 10)
	var wg sync.WaitGroup
	for i := range secondIDs {
		wg.Go(func() {
			resp, err := centralGreen.CreateVolume(ctx, second)
			if err != nil {
				t.Errorf("green's identical CreateVolume %d: %v", i, err)
			}
			secondIDs[i] = resp.GetVolume().GetVolumeId()
		})
	}
	wg.Wait()
	if secondIDs[0] == "" || slices.ContainsFunc(secondIDs, func(id string) bool { return id != secondIDs[0] }) {
		t.Errorf("green's ten identical creates got volumes %v, want one", secondIDs)
	}
	if got := len(truth()); got != len(before)+1 {
		t.Errorf("ten identical creates made %d volumes, want 1", got-len(before))
	}

	// A third volume, or growing past the bytes, is RESOURCE_EXHAUSTED, and nothing is
	// created or changed.
	before = truth()
	_, err = green.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-green-3", VolumeCapabilities: mount, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("green's third volume: %v, want RESOURCE_EXHAUSTED (maxVolumes 2)", err)
	}
	_, err = green.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: gv.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 256 << 20}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("green expanding past maxBytes: %v, want RESOURCE_EXHAUSTED", err)
	}
	if after := truth(); !slices.Equal(after, before) {
		t.Errorf("refused calls changed the appliance: %v, then %v", before, after)
	}
	if capResp, err := green.GetCapacity(ctx, &csi.GetCapacityRequest{}); err != nil || capResp.GetAvailableCapacity() > 128<<20 {
		t.Errorf("green's GetCapacity: %v, %v; want at most the 128 MiB its quota has left", capResp, err)
	}

	// The listener admits Identity and Controller only.
	_, err = csi.NewNodeClient(testutil.Dial(t, sc.clusters["blue"])).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if st := status.Convert(err); st.Code() != codes.PermissionDenied {
		t.Errorf("NodeGetInfo through the central gateway: %v, want PERMISSION_DENIED (listeners[0].methods)", err)
	}

	// Green's listing tokens are sealed for green: none holds the appliance's position (a
	// count of every tenant's volumes), and blue handing one in is refused.
	page, err := green.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 1})
	if err != nil || len(page.GetEntries()) != 1 || page.GetNextToken() == "" {
		t.Fatalf("green's first page of 1: %v, %v; want one entry and a next_token", page, err)
	}
	greenToken := page.GetNextToken()
	if raw, err := base64.RawURLEncoding.DecodeString(greenToken); err != nil || bytes.Contains(raw, []byte("volumes:")) || len(greenToken) > 128 {
		t.Errorf("green's token %q (decoded %q, %v): want base64url within 128 bytes showing no backend position", greenToken, raw, err)
	}
	_, err = blue.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 1, StartingToken: greenToken})
	if st := checkStatus(t, "blue listing with green's token", err, codes.Aborted); !strings.Contains(st.Message(), "was not issued to this caller") {
		t.Errorf("blue listing with green's token: %q, want it to say the token was not issued to this caller", st.Message())
	}

	// The ledger is durable: after a restart of the central gateway, each tenant still sees
	// exactly its own.
	sc.central.Kill()
	sc.startCentral(t)
	// Green's token outlives the restart (the same tenancy.tokenKeyFile): its second page.
	if page, err := green.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 1, StartingToken: greenToken}); err != nil || len(page.GetEntries()) != 1 || page.GetNextToken() != "" {
		t.Errorf("green's second page after a restart: %v, %v; want its other volume, and the end", page, err)
	}
	if got := listAll(t, sc.clusters["blue"]); !slices.Equal(got, []string{bv.GetVolumeId()}) {
		t.Errorf("after a restart blue lists %v, want %s", got, bv.GetVolumeId())
	}
	if got := listAll(t, sc.clusters["green"]); len(got) != 2 {
		t.Errorf("after a restart green lists %v, want its 2 volumes", got)
	}
	// Deleting frees the quota.
	if _, err := green.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: gv.GetVolumeId()}); err != nil {
		t.Fatalf("green unpublish: %v", err)
	}
	if _, err := green.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: gs.GetSnapshot().GetSnapshotId()}); err != nil {
		t.Fatalf("green DeleteSnapshot: %v", err)
	}
	if _, err := green.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: gv.GetVolumeId()}); err != nil {
		t.Fatalf("green DeleteVolume: %v", err)
	}
	create(green, "pvc-green-3")
	if !slices.Contains(truth(), bv.GetVolumeId()[len("blue."):]) {
		t.Errorf("blue's volume is gone from the appliance")
	}
}
