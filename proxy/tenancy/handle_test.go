package tenancy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The handle tests run two tenants, blue and green, on one embedded appliance through one
// ledger, and check what each sees and what reaches the appliance.

const (
	publishVolume     = "/csi.v1.Controller/ControllerPublishVolume"
	unpublishVolume   = "/csi.v1.Controller/ControllerUnpublishVolume"
	validateVolume    = "/csi.v1.Controller/ValidateVolumeCapabilities"
	modifyVolume      = "/csi.v1.Controller/ControllerModifyVolume"
	getGroupSnapshot  = "/csi.v1.GroupController/GetVolumeGroupSnapshot"
	modifyVolumeGroup = "/volumegroup.Controller/ModifyVolumeGroupMembership"
	nodeStats         = "/csi.v1.Node/NodeGetVolumeStats"
	nodeExpand        = "/csi.v1.Node/NodeExpandVolume"
	nodeHealth        = "/csi.v1.Node/NodeGetVolumeHealth"
	nodeStage         = "/csi.v1.Node/NodeStageVolume"
	nodePublish       = "/csi.v1.Node/NodePublishVolume"
	metadataDelta     = "/csi.v1.SnapshotMetadata/GetMetadataDelta"
	metadataAllocated = "/csi.v1.SnapshotMetadata/GetMetadataAllocated"
)

func TestSameNameTwoTenants(t *testing.T) {
	w := newWorld(t, map[string]Quota{"blue": {MaxVolumes: 1}})
	blue := w.createVolume("blue", "pvc-1", 10*mib)
	green := w.createVolume("green", "pvc-1", 10*mib)
	if !strings.HasPrefix(blue, "blue.") || !strings.HasPrefix(green, "green.") {
		t.Fatalf("IDs are not scoped: blue %q, green %q", blue, green)
	}
	if unscope(t, "blue", blue) == unscope(t, "green", green) {
		t.Fatalf("blue's and green's pvc-1 are the same backend volume %s", unscope(t, "blue", blue))
	}
	if got := w.backendVolumes(); len(got) != 2 {
		t.Fatalf("the appliance holds %d volumes, want 2", len(got))
	}

	// A retry returns the same volume, and does not count against the quota again: blue's
	// maxVolumes of 1 is full, yet the retry succeeds.
	req := &csi.CreateVolumeRequest{
		Name:               "pvc-1",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 10 * mib},
		VolumeCapabilities: []*csi.VolumeCapability{rwo},
	}
	orig := proto.Clone(req)
	for range 3 {
		resp := w.must("blue", createVolume, req).(*csi.CreateVolumeResponse)
		if resp.GetVolume().GetVolumeId() != blue {
			t.Fatalf("a retry of CreateVolume returned %q, want %q", resp.GetVolume().GetVolumeId(), blue)
		}
	}
	if !proto.Equal(req, orig) {
		t.Errorf("Handle modified the caller's request: %v", req)
	}
	if u := w.ledger.usageNow("blue"); u != (usage{volumes: 1, bytes: 10 * mib}) {
		t.Errorf("blue's usage after retries = %+v; want 1 volume of 10 MiB", u)
	}
	if got := w.backendVolumes(); len(got) != 2 {
		t.Fatalf("the appliance holds %d volumes after retries, want 2", len(got))
	}
	// And a new name is over the quota.
	_, err := w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.ResourceExhausted, "maxVolumes")

	// The backend's names are the scoped ones.
	if id, ok, _ := w.ledger.ByName(t.Context(), Volume, "blue.pvc-1"); !ok || id != unscope(t, "blue", blue) {
		t.Errorf("the ledger has blue.pvc-1 as %q, %t", id, ok)
	}
	if id, ok, _ := w.ledger.ByName(t.Context(), Volume, "green.pvc-1"); !ok || id != unscope(t, "green", green) {
		t.Errorf("the ledger has green.pvc-1 as %q, %t", id, ok)
	}
}

// greenEstate is what green owns in the cross-tenant test, by green's IDs.
type greenEstate struct {
	volume, volume2, grouped string   // grouped is in green's volume group
	snapshot                 string   // of volume
	groupSnapshot            string   // of volume and volume2
	groupMembers             []string // its snapshots
	volumeGroup              string
}

// backendState is everything the appliance holds, read directly.
func (w *world) backendState() []proto.Message {
	w.t.Helper()
	var out []proto.Message
	for _, c := range []struct {
		method string
		req    proto.Message
	}{
		{listVolumes, &csi.ListVolumesRequest{}},
		{listSnapshots, &csi.ListSnapshotsRequest{}},
		{listVolumeGroups, &volumegroup.ListVolumeGroupsRequest{}},
	} {
		resp, err := w.raw(c.method, c.req)
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, resp)
	}
	return out
}

// forms returns the ways blue might name one of green's objects: green's own ID, green's
// backend ID with blue's prefix (forged), the bare backend ID, and green's ID with blue's
// prefix.
func forms(t *testing.T, greenID string) []string {
	backendID := unscope(t, "green", greenID)
	return []string{greenID, "blue." + backendID, backendID, "blue." + greenID}
}

func TestCrossTenantMatrix(t *testing.T) {
	w := newWorld(t, nil)

	// Green's estate.
	g := greenEstate{
		volume:  w.createVolume("green", "data", 10*mib),
		volume2: w.createVolume("green", "logs", 10*mib),
		grouped: w.createVolume("green", "grouped", 10*mib),
	}
	g.snapshot = w.createSnapshot("green", "data-snap", g.volume)
	gs := w.must("green", createVolumeGroupSnapshot, &csi.CreateVolumeGroupSnapshotRequest{
		Name: "both", SourceVolumeIds: []string{g.volume, g.volume2},
	}).(*csi.CreateVolumeGroupSnapshotResponse).GetGroupSnapshot()
	g.groupSnapshot = gs.GetGroupSnapshotId()
	for _, s := range gs.GetSnapshots() {
		g.groupMembers = append(g.groupMembers, s.GetSnapshotId())
	}
	g.volumeGroup = w.must("green", createVolumeGroup, &volumegroup.CreateVolumeGroupRequest{
		Name: "group", VolumeIds: []string{g.grouped},
	}).(*volumegroup.CreateVolumeGroupResponse).GetVolumeGroup().GetVolumeGroupId()
	w.must("green", publishVolume, &csi.ControllerPublishVolumeRequest{
		VolumeId: g.volume2, NodeId: "node-1", VolumeCapability: rwo,
	})

	// Blue's own, to mix with green's.
	blueVolume := w.createVolume("blue", "data", 10*mib)
	blueGroup := w.must("blue", createVolumeGroup, &volumegroup.CreateVolumeGroupRequest{Name: "group"}).(*volumegroup.CreateVolumeGroupResponse).GetVolumeGroup().GetVolumeGroupId()

	greenView := func() []proto.Message {
		t.Helper()
		var out []proto.Message
		for _, c := range []struct {
			method string
			req    proto.Message
		}{
			{getVolume, &csi.ControllerGetVolumeRequest{VolumeId: g.volume}},
			{getVolume, &csi.ControllerGetVolumeRequest{VolumeId: g.volume2}},
			{getVolume, &csi.ControllerGetVolumeRequest{VolumeId: g.grouped}},
			{getSnapshot, &csi.GetSnapshotRequest{SnapshotId: g.snapshot}},
			{getGroupSnapshot, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: g.groupSnapshot, SnapshotIds: g.groupMembers}},
			{getVolumeGroup, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: g.volumeGroup}},
			{listVolumes, &csi.ListVolumesRequest{}},
			{listSnapshots, &csi.ListSnapshotsRequest{}},
			{listVolumeGroups, &volumegroup.ListVolumeGroupsRequest{}},
		} {
			out = append(out, w.must("green", c.method, c.req))
		}
		return out
	}
	beforeGreen, beforeBackend := greenView(), w.backendState()
	if n := len(beforeGreen[6].(*csi.ListVolumesResponse).GetEntries()); n != 3 {
		t.Fatalf("green lists %d volumes, want 3", n)
	}

	type probe struct {
		method string
		req    proto.Message
		code   codes.Code // OK: an empty response (deletes, list filters)
	}
	volumeProbes := func(id string) []probe {
		return []probe{
			{getVolume, &csi.ControllerGetVolumeRequest{VolumeId: id}, codes.NotFound},
			{publishVolume, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-1", VolumeCapability: rwo}, codes.NotFound},
			// OK, as the gateway answers for an absent volume (its error table): neither
			// published nor reached (checked below).
			{unpublishVolume, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"}, codes.OK},
			{unpublishVolume, &csi.ControllerUnpublishVolumeRequest{VolumeId: id}, codes.OK},
			{validateVolume, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csi.VolumeCapability{rwo}}, codes.NotFound},
			{expandVolume, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 100 * mib}}, codes.NotFound},
			{modifyVolume, &csi.ControllerModifyVolumeRequest{VolumeId: id, MutableParameters: map[string]string{"tier": "gold"}}, codes.NotFound},
			{getVolumeHealth, &csi.ControllerGetVolumeHealthRequest{VolumeId: id}, codes.NotFound},
			{createSnapshot, &csi.CreateSnapshotRequest{Name: "steal", SourceVolumeId: id}, codes.NotFound},
			{createVolume, &csi.CreateVolumeRequest{Name: "clone", VolumeCapabilities: []*csi.VolumeCapability{rwo},
				VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}}, codes.NotFound},
			{listSnapshots, &csi.ListSnapshotsRequest{SourceVolumeId: id}, codes.OK},
			{nodeStats, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: "/mnt/x"}, codes.NotFound},
			{nodeExpand, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: "/mnt/x"}, codes.NotFound},
			{nodeHealth, &csi.NodeGetVolumeHealthRequest{VolumeId: id, VolumePublishPath: "/mnt/x"}, codes.NotFound},
			{nodeStage, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: "/mnt/s", VolumeCapability: rwo}, codes.NotFound},
			{nodePublish, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: "/mnt/t", VolumeCapability: rwo}, codes.NotFound},
			{createVolumeGroupSnapshot, &csi.CreateVolumeGroupSnapshotRequest{Name: "steal", SourceVolumeIds: []string{blueVolume, id}}, codes.NotFound},
			{createVolumeGroupSnapshot, &csi.CreateVolumeGroupSnapshotRequest{Name: "steal", SourceVolumeIds: []string{id}}, codes.NotFound},
			{modifyVolumeGroup, &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: blueGroup, VolumeIds: []string{id}}, codes.NotFound},
			{modifyVolumeGroup, &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: blueGroup, VolumeIds: []string{blueVolume, id}}, codes.NotFound},
			{createVolumeGroup, &volumegroup.CreateVolumeGroupRequest{Name: "steal", VolumeIds: []string{id}}, codes.NotFound},
			{deleteVolume, &csi.DeleteVolumeRequest{VolumeId: id}, codes.OK},
		}
	}
	snapshotProbes := func(id string) []probe {
		return []probe{
			{getSnapshot, &csi.GetSnapshotRequest{SnapshotId: id}, codes.NotFound},
			{listSnapshots, &csi.ListSnapshotsRequest{SnapshotId: id}, codes.OK},
			{listSnapshots, &csi.ListSnapshotsRequest{SnapshotId: id, MaxEntries: 1}, codes.OK},
			{createVolume, &csi.CreateVolumeRequest{Name: "restore", VolumeCapabilities: []*csi.VolumeCapability{rwo},
				VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}}, codes.NotFound},
			{metadataAllocated, &csi.GetMetadataAllocatedRequest{SnapshotId: id}, codes.NotFound},
			{metadataDelta, &csi.GetMetadataDeltaRequest{BaseSnapshotId: id, TargetSnapshotId: id}, codes.NotFound},
			{deleteSnapshot, &csi.DeleteSnapshotRequest{SnapshotId: id}, codes.OK},
		}
	}
	groupSnapshotProbes := func(id string, members []string) []probe {
		return []probe{
			{getGroupSnapshot, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id}, codes.NotFound},
			{getGroupSnapshot, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: members}, codes.NotFound},
			{deleteVolumeGroupSnapshot, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id}, codes.OK},
			{deleteVolumeGroupSnapshot, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: members}, codes.OK},
		}
	}
	volumeGroupProbes := func(id string) []probe {
		return []probe{
			{getVolumeGroup, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: id}, codes.NotFound},
			{modifyVolumeGroup, &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{blueVolume}}, codes.NotFound},
			{modifyVolumeGroup, &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id}, codes.NotFound}, // would empty it
			{deleteVolumeGroup, &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: id}, codes.OK},
		}
	}

	var probes []probe
	for _, v := range []string{g.volume, g.volume2, g.grouped} {
		for _, id := range forms(t, v) {
			probes = append(probes, volumeProbes(id)...)
		}
	}
	for _, s := range append([]string{g.snapshot}, g.groupMembers...) {
		for _, id := range forms(t, s) {
			probes = append(probes, snapshotProbes(id)...)
		}
	}
	for _, id := range forms(t, g.groupSnapshot) {
		var members []string
		for _, m := range g.groupMembers {
			members = append(members, strings.Replace(m, "green.", strings.TrimSuffix(id, unscope(t, "green", g.groupSnapshot)), 1))
		}
		probes = append(probes, groupSnapshotProbes(id, members)...)
		probes = append(probes, groupSnapshotProbes(id, nil)...)
	}
	for _, id := range forms(t, g.volumeGroup) {
		probes = append(probes, volumeGroupProbes(id)...)
	}

	for _, p := range probes {
		t.Run(strings.TrimPrefix(p.method, "/")+"/"+shortReq(p.req), func(t *testing.T) {
			orig := proto.Clone(p.req)
			before := w.rec.count()
			resp, err := w.call("blue", p.method, p.req)
			if !proto.Equal(orig, p.req) {
				t.Errorf("Handle modified the request")
			}
			if reached := w.rec.since(before); len(reached) > 0 {
				t.Errorf("the call reached the appliance: %v", reached)
			}
			if p.code != codes.OK {
				wantCode(t, err, p.code, "does not exist")
				if msg := status.Convert(err).Message(); strings.Contains(msg, "green") && !strings.Contains(reqText(p.req), "green") {
					t.Errorf("the error reveals green: %q", msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v; want OK with an empty response", err)
			}
			want, _ := responseType(p.method)
			if !proto.Equal(resp, want) {
				t.Errorf("got %v; want an empty %T", resp, want)
			}
		})
	}

	// Green's estate is untouched, seen by green and by the appliance.
	afterGreen, afterBackend := greenView(), w.backendState()
	for i := range beforeGreen {
		if !proto.Equal(beforeGreen[i], afterGreen[i]) {
			t.Errorf("green's view changed:\nbefore %v\nafter  %v", beforeGreen[i], afterGreen[i])
		}
	}
	for i := range beforeBackend {
		if !proto.Equal(beforeBackend[i], afterBackend[i]) {
			t.Errorf("the appliance's state changed:\nbefore %v\nafter  %v", beforeBackend[i], afterBackend[i])
		}
	}
	// Nothing of green's was given to blue or forgotten.
	for kind, ids := range map[Kind][]string{
		Volume:        {g.volume, g.volume2, g.grouped},
		Snapshot:      append([]string{g.snapshot}, g.groupMembers...),
		GroupSnapshot: {g.groupSnapshot},
		VolumeGroup:   {g.volumeGroup},
	} {
		for _, id := range ids {
			if r, ok, err := w.ledger.Lookup(t.Context(), kind, unscope(t, "green", id)); err != nil || !ok || r.Tenant != "green" {
				t.Errorf("the ledger's %v %s: %+v, %t, %v", kind, id, r, ok, err)
			}
		}
	}
	if u := w.ledger.usageNow("green"); u != (usage{volumes: 3, bytes: 30 * mib}) {
		t.Errorf("green's usage = %+v", u)
	}
	if u := w.ledger.usageNow("blue"); u != (usage{volumes: 1, bytes: 10 * mib}) {
		t.Errorf("blue's usage = %+v", u)
	}
	// Blue's lists hold nothing of green's.
	for _, c := range []struct {
		method string
		req    proto.Message
	}{
		{listVolumes, &csi.ListVolumesRequest{}},
		{listSnapshots, &csi.ListSnapshotsRequest{}},
		{listVolumeGroups, &volumegroup.ListVolumeGroupsRequest{}},
	} {
		text := reqText(w.must("blue", c.method, c.req))
		for _, id := range []string{g.volume, g.volume2, g.grouped, g.snapshot, g.volumeGroup} {
			if strings.Contains(text, unscope(t, "green", id)) {
				t.Errorf("blue's %s shows green's %s: %s", c.method, id, text)
			}
		}
	}
}

// TestAbsentLooksAbsent checks that another tenant's object and an object that exists
// nowhere are answered alike, so a guessed ID reveals nothing.
func TestAbsentLooksAbsent(t *testing.T) {
	w := newWorld(t, nil)
	green := unscope(t, "green", w.createVolume("green", "data", mib))
	nowhere := "vol-" + strings.Repeat("0", len(green)-len("vol-"))
	for _, method := range []string{getVolume} {
		_, errGreen := w.call("blue", method, &csi.ControllerGetVolumeRequest{VolumeId: "blue." + green})
		_, errNowhere := w.call("blue", method, &csi.ControllerGetVolumeRequest{VolumeId: "blue." + nowhere})
		sg, sn := status.Convert(errGreen), status.Convert(errNowhere)
		if sg.Code() != sn.Code() || strings.ReplaceAll(sg.Message(), green, nowhere) != sn.Message() {
			t.Errorf("green's volume: %v %q; a volume that does not exist: %v %q", sg.Code(), sg.Message(), sn.Code(), sn.Message())
		}
	}
}

func shortReq(m proto.Message) string {
	s := reqText(m)
	if len(s) > 60 {
		s = s[:60]
	}
	return strings.NewReplacer(" ", "_", "/", "_").Replace(s)
}

func reqText(m proto.Message) string { return fmt.Sprint(m) }

// listAll walks a tenant's listing page by page with max entries and returns the IDs it
// saw, failing on a page larger than max or a duplicate.
func (w *world) listAll(tenant, method string, max int32) []string {
	w.t.Helper()
	var ids []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 50 {
			w.t.Fatalf("%s: more than 50 pages", method)
		}
		var entries []string
		var next string
		switch method {
		case listVolumes:
			resp := w.must(tenant, method, &csi.ListVolumesRequest{MaxEntries: max, StartingToken: token}).(*csi.ListVolumesResponse)
			for _, e := range resp.GetEntries() {
				entries = append(entries, e.GetVolume().GetVolumeId())
			}
			next = resp.GetNextToken()
		case listSnapshots:
			resp := w.must(tenant, method, &csi.ListSnapshotsRequest{MaxEntries: max, StartingToken: token}).(*csi.ListSnapshotsResponse)
			for _, e := range resp.GetEntries() {
				entries = append(entries, e.GetSnapshot().GetSnapshotId())
			}
			next = resp.GetNextToken()
		case listVolumeGroups:
			resp := w.must(tenant, method, &volumegroup.ListVolumeGroupsRequest{MaxEntries: max, StartingToken: token}).(*volumegroup.ListVolumeGroupsResponse)
			for _, e := range resp.GetEntries() {
				entries = append(entries, e.GetVolumeGroup().GetVolumeGroupId())
			}
			next = resp.GetNextToken()
		case listVolumeHealth:
			resp := w.must(tenant, method, &csi.ControllerListVolumeHealthRequest{MaxEntries: max, StartingToken: token}).(*csi.ControllerListVolumeHealthResponse)
			for _, e := range resp.GetEntries() {
				entries = append(entries, e.GetVolumeId())
			}
			next = resp.GetNextToken()
		}
		if max > 0 && int32(len(entries)) > max {
			w.t.Errorf("%s of %s: a page of %d entries, max_entries %d", method, tenant, len(entries), max)
		}
		if max == 0 && next != "" {
			w.t.Errorf("%s of %s without max_entries gave a next_token %q", method, tenant, next)
		}
		for _, id := range entries {
			if slices.Contains(ids, id) {
				w.t.Errorf("%s of %s: %s on two pages", method, tenant, id)
			}
			ids = append(ids, id)
		}
		if next == "" {
			return ids
		}
		token = next
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestListFilteringAndPagination(t *testing.T) {
	w := newWorld(t, nil)
	owned := map[string][]string{}
	snaps := map[string][]string{}
	for i := range 5 {
		for _, tenant := range []string{"blue", "green"} {
			id := w.createVolume(tenant, fmt.Sprintf("pvc-%d", i), mib)
			owned[tenant] = append(owned[tenant], id)
		}
	}
	for i := range 5 {
		for _, tenant := range []string{"green", "blue"} {
			snaps[tenant] = append(snaps[tenant], w.createSnapshot(tenant, fmt.Sprintf("snap-%d", i), owned[tenant][i]))
		}
	}
	// Volumes nobody owns (made behind the gateway's back) are nobody's.
	for i := range 3 {
		if _, err := w.raw(createVolume, &csi.CreateVolumeRequest{Name: fmt.Sprintf("stray-%d", i), VolumeCapabilities: []*csi.VolumeCapability{rwo}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tenant := range []string{"blue", "green"} {
		for _, max := range []int32{0, 1, 2, 3, 5, 6, 100} {
			if got := w.listAll(tenant, listVolumes, max); !sameSet(got, owned[tenant]) {
				t.Errorf("%s's ListVolumes by %d: %v; want %v", tenant, max, got, owned[tenant])
			}
			if got := w.listAll(tenant, listSnapshots, max); !sameSet(got, snaps[tenant]) {
				t.Errorf("%s's ListSnapshots by %d: %v; want %v", tenant, max, got, snaps[tenant])
			}
		}
	}
	// ListVolumes pages come in the order of the backend's IDs (the ledger's index of the
	// tenant's volumes): blue's 5 by 2 are [0 1] [2 3] [4] of them sorted.
	token := ""
	byID := slices.Sorted(slices.Values(owned["blue"]))
	for _, want := range [][]string{byID[0:2], byID[2:4], byID[4:5]} {
		resp := w.must("blue", listVolumes, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token}).(*csi.ListVolumesResponse)
		var got []string
		for _, e := range resp.GetEntries() {
			got = append(got, e.GetVolume().GetVolumeId())
		}
		if !slices.Equal(got, want) {
			t.Errorf("blue's page after %q: %v; want %v", token, got, want)
		}
		token = resp.GetNextToken()
	}
	// Filters by the tenant's own IDs work, and answer in the tenant's IDs.
	resp := w.must("blue", listSnapshots, &csi.ListSnapshotsRequest{SourceVolumeId: owned["blue"][3]}).(*csi.ListSnapshotsResponse)
	if len(resp.GetEntries()) != 1 || resp.GetEntries()[0].GetSnapshot().GetSnapshotId() != snaps["blue"][3] ||
		resp.GetEntries()[0].GetSnapshot().GetSourceVolumeId() != owned["blue"][3] {
		t.Errorf("blue's ListSnapshots of its volume: %v", resp)
	}
	resp = w.must("blue", listSnapshots, &csi.ListSnapshotsRequest{SnapshotId: snaps["blue"][2]}).(*csi.ListSnapshotsResponse)
	if len(resp.GetEntries()) != 1 || resp.GetEntries()[0].GetSnapshot().GetSnapshotId() != snaps["blue"][2] {
		t.Errorf("blue's ListSnapshots of its snapshot: %v", resp)
	}
	// A tenant with nothing lists nothing.
	if got := w.listAll("red", listVolumes, 2); len(got) != 0 {
		t.Errorf("red lists %v", got)
	}
	// A token the gateway did not seal for blue's ListVolumes is ABORTED.
	_, err := w.call("blue", listVolumes, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: "nonsense"})
	wantCode(t, err, codes.Aborted)
}

func TestListVolumeHealth(t *testing.T) {
	w := newWorld(t, nil)
	var sick = map[string][]string{}
	for i := range 3 {
		for _, tenant := range []string{"blue", "green"} {
			id := w.createVolume(tenant, fmt.Sprintf("pvc-%d", i), mib)
			w.createVolume(tenant, fmt.Sprintf("healthy-%d", i), mib)
			// An image that is gone makes a volume ill.
			if err := os.Remove(filepath.Join(w.dataDir, "volumes", unscope(t, tenant, id)+".img")); err != nil {
				t.Fatal(err)
			}
			sick[tenant] = append(sick[tenant], id)
		}
	}
	for _, tenant := range []string{"blue", "green"} {
		for _, max := range []int32{0, 1, 2, 4} {
			if got := w.listAll(tenant, listVolumeHealth, max); !sameSet(got, sick[tenant]) {
				t.Errorf("%s's ControllerListVolumeHealth by %d: %v; want %v", tenant, max, got, sick[tenant])
			}
		}
	}
}

func TestListEntryOwnIDNotSource(t *testing.T) {
	// A clone's list entry names its source too (content_source); the entry is the clone's.
	w := newWorld(t, nil)
	src := w.createVolume("blue", "src", mib)
	snap := w.createSnapshot("blue", "snap", src)
	clone := w.must("blue", createVolume, &csi.CreateVolumeRequest{
		Name: "clone", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}},
	}).(*csi.CreateVolumeResponse).GetVolume()
	if clone.GetContentSource().GetVolume().GetVolumeId() != src {
		t.Errorf("the clone's content source is %v; want %s", clone.GetContentSource(), src)
	}
	restored := w.must("blue", createVolume, &csi.CreateVolumeRequest{
		Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap}}},
	}).(*csi.CreateVolumeResponse).GetVolume()
	if restored.GetContentSource().GetSnapshot().GetSnapshotId() != snap {
		t.Errorf("the restored volume's content source is %v; want %s", restored.GetContentSource(), snap)
	}
	// The source is deleted (forgotten); the clone still lists, once.
	w.must("blue", deleteVolume, &csi.DeleteVolumeRequest{VolumeId: src})
	for _, max := range []int32{0, 1} {
		if got := w.listAll("blue", listVolumes, max); !sameSet(got, []string{clone.GetVolumeId(), restored.GetVolumeId()}) {
			t.Errorf("blue lists %v", got)
		}
	}
	// Green cannot restore from blue's snapshot, nor clone blue's clone.
	_, err := w.call("green", createVolume, &csi.CreateVolumeRequest{
		Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "green." + unscope(t, "blue", snap)}}},
	})
	wantCode(t, err, codes.NotFound)
}

func TestQuotaVolumes(t *testing.T) {
	w := newWorld(t, map[string]Quota{"blue": {MaxVolumes: 2}})
	a := w.createVolume("blue", "a", mib)
	w.createVolume("blue", "b", mib)
	before := w.rec.count()
	_, err := w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: "c", VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.ResourceExhausted, "tenant blue", "maxVolumes")
	if reached := w.rec.since(before); len(reached) > 0 {
		t.Errorf("a create over the quota reached the appliance: %v", reached)
	}
	if n := len(w.backendVolumes()); n != 2 {
		t.Errorf("the appliance holds %d volumes", n)
	}
	// Green's quota is its own (none).
	for i := range 4 {
		w.createVolume("green", fmt.Sprint(i), mib)
	}
	// Snapshots are not volumes.
	w.createSnapshot("blue", "s", a)
	// A delete frees the room.
	w.must("blue", deleteVolume, &csi.DeleteVolumeRequest{VolumeId: a})
	w.createVolume("blue", "c", mib)
	_, err = w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: "d", VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.ResourceExhausted)
	// A failed create gives its reservation back.
	w.must("blue", deleteVolume, &csi.DeleteVolumeRequest{VolumeId: "blue." + unscope(t, "blue", w.createVolume("blue", "c", mib))})
	_, err = w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: "bad", VolumeCapabilities: []*csi.VolumeCapability{rwo}, Parameters: map[string]string{"no-such-key": "x"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a create with an unknown parameter: %v", err)
	}
	if u := w.ledger.usageNow("blue"); u.volumes != 1 {
		t.Errorf("after a failed create blue holds %d volumes in its quota, want 1", u.volumes)
	}
	w.createVolume("blue", "e", mib)
}

func TestQuotaBytes(t *testing.T) {
	w := newWorld(t, map[string]Quota{"blue": {MaxBytes: 30 * mib}})
	capacity := func(tenant string) *csi.GetCapacityResponse {
		t.Helper()
		return w.must(tenant, getCapacity, &csi.GetCapacityRequest{VolumeCapabilities: []*csi.VolumeCapability{rwo}}).(*csi.GetCapacityResponse)
	}
	if c := capacity("blue"); c.GetAvailableCapacity() != 30*mib || c.GetMaximumVolumeSize().GetValue() != 30*mib {
		t.Errorf("blue's GetCapacity with nothing used: %v; want 30 MiB", c)
	}
	if c := capacity("green"); c.GetAvailableCapacity() <= 30*mib {
		t.Errorf("green (no quota) sees blue's limit: %v", c)
	}

	a := w.createVolume("blue", "a", 20*mib)
	if c := capacity("blue"); c.GetAvailableCapacity() != 10*mib || c.GetMaximumVolumeSize().GetValue() != 10*mib {
		t.Errorf("blue's GetCapacity with 20 of 30 MiB used: %v", c)
	}
	before := w.rec.count()
	_, err := w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: "b", CapacityRange: &csi.CapacityRange{RequiredBytes: 20 * mib}, VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.ResourceExhausted, "maxBytes")
	// A range the quota cannot meet.
	_, err = w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: "b", CapacityRange: &csi.CapacityRange{RequiredBytes: 11 * mib, LimitBytes: 11 * mib}, VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.ResourceExhausted, "maxBytes")
	if reached := w.rec.since(before); len(reached) > 0 {
		t.Errorf("creates over the quota reached the appliance: %v", reached)
	}
	if n := len(w.backendVolumes()); n != 1 {
		t.Errorf("the appliance holds %d volumes", n)
	}

	// Expansion beyond the quota: refused, the size unchanged.
	_, err = w.call("blue", expandVolume, &csi.ControllerExpandVolumeRequest{VolumeId: a, CapacityRange: &csi.CapacityRange{RequiredBytes: 31 * mib}})
	wantCode(t, err, codes.ResourceExhausted, "maxBytes")
	getSize := func(id string) int64 {
		t.Helper()
		resp, err := w.raw(getVolume, &csi.ControllerGetVolumeRequest{VolumeId: unscope(t, "blue", id)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*csi.ControllerGetVolumeResponse).GetVolume().GetCapacityBytes()
	}
	if got := getSize(a); got != 20*mib {
		t.Errorf("after a refused expansion the volume holds %d bytes", got)
	}
	// Within the quota: done, and counted.
	resp := w.must("blue", expandVolume, &csi.ControllerExpandVolumeRequest{VolumeId: a, CapacityRange: &csi.CapacityRange{RequiredBytes: 30 * mib}}).(*csi.ControllerExpandVolumeResponse)
	if resp.GetCapacityBytes() != 30*mib || getSize(a) != 30*mib {
		t.Errorf("expansion to 30 MiB: %v, the appliance says %d", resp, getSize(a))
	}
	if c := capacity("blue"); c.GetAvailableCapacity() != 0 || c.GetMaximumVolumeSize().GetValue() != 0 {
		t.Errorf("blue's GetCapacity with the quota full: %v", c)
	}
	_, err = w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: "b", CapacityRange: &csi.CapacityRange{RequiredBytes: mib}, VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.ResourceExhausted, "maxBytes")
	// Expanding to the size it has (a retry) needs no room.
	w.must("blue", expandVolume, &csi.ControllerExpandVolumeRequest{VolumeId: a, CapacityRange: &csi.CapacityRange{RequiredBytes: 30 * mib}})
	if u := w.ledger.usageNow("blue"); u != (usage{volumes: 1, bytes: 30 * mib}) {
		t.Errorf("blue's usage = %+v", u)
	}

	// A delete frees the bytes.
	w.must("blue", deleteVolume, &csi.DeleteVolumeRequest{VolumeId: a})
	if c := capacity("blue"); c.GetAvailableCapacity() != 30*mib {
		t.Errorf("blue's GetCapacity after the delete: %v", c)
	}
	w.createVolume("blue", "b", 30*mib)
}

// TestQuotaBytesBoundsWhatTheBackendAllocates checks that a byte quota bounds the bytes the
// backend actually allocates, not only those the request names. A request without a
// capacity range gets the backend's default size; one that asks for less than the backend's
// allocation unit gets a whole unit.
func TestQuotaBytesBoundsWhatTheBackendAllocates(t *testing.T) {
	for _, tc := range []struct {
		name string
		rng  *csi.CapacityRange
	}{
		{"no capacity range", nil}, // the appliance makes 1 GiB
		{"less than the allocation unit", &csi.CapacityRange{RequiredBytes: 1}}, // rounded up to 1 MiB
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, map[string]Quota{"blue": {MaxBytes: 3 * mib / 2}})
			for i := range 3 {
				_, err := w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: fmt.Sprint(i), CapacityRange: tc.rng, VolumeCapabilities: []*csi.VolumeCapability{rwo}})
				if err != nil && status.Code(err) != codes.ResourceExhausted && status.Code(err) != codes.OutOfRange {
					t.Fatal(err)
				}
			}
			var total int64
			for _, id := range w.backendVolumes() {
				resp, _ := w.raw(getVolume, &csi.ControllerGetVolumeRequest{VolumeId: id})
				total += resp.(*csi.ControllerGetVolumeResponse).GetVolume().GetCapacityBytes()
			}
			if u := w.ledger.usageNow("blue"); total > 3*mib/2 || u.bytes > 3*mib/2 {
				t.Errorf("maxBytes is 1.5 MiB, yet blue holds %d bytes on the appliance (the ledger counts %d)", total, u.bytes)
			}
		})
	}
}

func TestGroupSnapshots(t *testing.T) {
	w := newWorld(t, nil)
	v1, v2 := w.createVolume("blue", "a", mib), w.createVolume("blue", "b", mib)
	req := &csi.CreateVolumeGroupSnapshotRequest{Name: "gs", SourceVolumeIds: []string{v1, v2}}
	gs := w.must("blue", createVolumeGroupSnapshot, req).(*csi.CreateVolumeGroupSnapshotResponse).GetGroupSnapshot()
	id := gs.GetGroupSnapshotId()
	if !strings.HasPrefix(id, "blue.") || len(gs.GetSnapshots()) != 2 {
		t.Fatalf("the group snapshot: %v", gs)
	}
	var members []string
	for _, s := range gs.GetSnapshots() {
		if !strings.HasPrefix(s.GetSnapshotId(), "blue.") || s.GetGroupSnapshotId() != id ||
			(s.GetSourceVolumeId() != v1 && s.GetSourceVolumeId() != v2) {
			t.Errorf("a member snapshot in foreign terms: %v", s)
		}
		members = append(members, s.GetSnapshotId())
	}
	// A retry returns the same.
	again := w.must("blue", createVolumeGroupSnapshot, req).(*csi.CreateVolumeGroupSnapshotResponse).GetGroupSnapshot()
	if !proto.Equal(again, gs) {
		t.Errorf("a retry returned %v; want %v", again, gs)
	}
	// Blue sees it and its snapshots.
	got := w.must("blue", getGroupSnapshot, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: members}).(*csi.GetVolumeGroupSnapshotResponse).GetGroupSnapshot()
	if !proto.Equal(got, gs) {
		t.Errorf("blue's GetVolumeGroupSnapshot: %v; want %v", got, gs)
	}
	if l := w.listAll("blue", listSnapshots, 1); !sameSet(l, members) {
		t.Errorf("blue lists snapshots %v; want %v", l, members)
	}
	for _, m := range members {
		w.must("blue", getSnapshot, &csi.GetSnapshotRequest{SnapshotId: m})
	}
	// Green does not.
	greenID := "green." + unscope(t, "blue", id)
	_, err := w.call("green", getGroupSnapshot, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: greenID})
	wantCode(t, err, codes.NotFound)
	if l := w.listAll("green", listSnapshots, 0); len(l) != 0 {
		t.Errorf("green lists snapshots %v", l)
	}
	w.must("green", deleteVolumeGroupSnapshot, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: greenID})
	w.must("blue", getGroupSnapshot, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id})

	// Blue deletes it: gone from the appliance and from the ledger.
	w.must("blue", deleteVolumeGroupSnapshot, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: members})
	if s := w.backendSnapshots(); len(s) != 0 {
		t.Errorf("the appliance still holds snapshots %v", s)
	}
	_, err = w.call("blue", getGroupSnapshot, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id})
	wantCode(t, err, codes.NotFound)
	if _, ok, _ := w.ledger.Lookup(t.Context(), GroupSnapshot, unscope(t, "blue", id)); ok {
		t.Error("the ledger still has the group snapshot")
	}
	for _, m := range members {
		if _, ok, _ := w.ledger.Lookup(t.Context(), Snapshot, unscope(t, "blue", m)); ok {
			t.Errorf("the ledger still has the member snapshot %s", m)
		}
	}
	// A member cannot be deleted on its own (the appliance refuses), but the group can be
	// deleted again: OK.
	w.must("blue", deleteVolumeGroupSnapshot, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: members})
}

// TestGroupSnapshotDeleteWithoutSnapshotIDs: the appliance deletes a group snapshot's
// members when snapshot_ids is empty (csi-sanity sends none); the ledger should forget them.
func TestGroupSnapshotDeleteWithoutSnapshotIDs(t *testing.T) {
	w := newWorld(t, nil)
	v1 := w.createVolume("blue", "a", mib)
	gs := w.must("blue", createVolumeGroupSnapshot, &csi.CreateVolumeGroupSnapshotRequest{Name: "gs", SourceVolumeIds: []string{v1}}).(*csi.CreateVolumeGroupSnapshotResponse).GetGroupSnapshot()
	w.must("blue", deleteVolumeGroupSnapshot, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gs.GetGroupSnapshotId()})
	if s := w.backendSnapshots(); len(s) != 0 {
		t.Fatalf("the appliance still holds %v", s)
	}
	for _, s := range gs.GetSnapshots() {
		if _, ok, _ := w.ledger.Lookup(t.Context(), Snapshot, unscope(t, "blue", s.GetSnapshotId())); ok {
			t.Errorf("the ledger still records the deleted member snapshot %s", s.GetSnapshotId())
		}
	}
}

func TestVolumeGroups(t *testing.T) {
	w := newWorld(t, map[string]Quota{"blue": {MaxVolumes: 3, MaxBytes: 30 * mib}})
	v1, v2, v3 := w.createVolume("blue", "a", 10*mib), w.createVolume("blue", "b", 10*mib), w.createVolume("blue", "c", 10*mib)
	green := w.createVolume("green", "a", 10*mib)

	vg := w.must("blue", createVolumeGroup, &volumegroup.CreateVolumeGroupRequest{Name: "vg", VolumeIds: []string{v1, v2}}).(*volumegroup.CreateVolumeGroupResponse).GetVolumeGroup()
	id := vg.GetVolumeGroupId()
	var memberIDs []string
	for _, v := range vg.GetVolumes() {
		memberIDs = append(memberIDs, v.GetVolumeId())
	}
	if !strings.HasPrefix(id, "blue.") || !sameSet(memberIDs, []string{v1, v2}) {
		t.Fatalf("the volume group: %v", vg)
	}
	// Green may have a group of the same name.
	greenGroup := w.must("green", createVolumeGroup, &volumegroup.CreateVolumeGroupRequest{Name: "vg", VolumeIds: []string{green}}).(*volumegroup.CreateVolumeGroupResponse).GetVolumeGroup().GetVolumeGroupId()
	if unscope(t, "green", greenGroup) == unscope(t, "blue", id) {
		t.Fatal("blue's and green's vg are one group")
	}

	got := w.must("blue", getVolumeGroup, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: id}).(*volumegroup.ControllerGetVolumeGroupResponse).GetVolumeGroup()
	if !proto.Equal(got, vg) {
		t.Errorf("blue's ControllerGetVolumeGroup: %v; want %v", got, vg)
	}
	for _, max := range []int32{0, 1} {
		if l := w.listAll("blue", listVolumeGroups, max); !slices.Equal(l, []string{id}) {
			t.Errorf("blue lists groups %v", l)
		}
		if l := w.listAll("green", listVolumeGroups, max); !slices.Equal(l, []string{greenGroup}) {
			t.Errorf("green lists groups %v", l)
		}
	}
	mod := w.must("blue", modifyVolumeGroup, &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v1, v3}}).(*volumegroup.ModifyVolumeGroupMembershipResponse).GetVolumeGroup()
	memberIDs = nil
	for _, v := range mod.GetVolumes() {
		memberIDs = append(memberIDs, v.GetVolumeId())
	}
	if mod.GetVolumeGroupId() != id || !sameSet(memberIDs, []string{v1, v3}) {
		t.Errorf("after ModifyVolumeGroupMembership: %v", mod)
	}
	// Green cannot delete it.
	w.must("green", deleteVolumeGroup, &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: "green." + unscope(t, "blue", id)})
	w.must("blue", getVolumeGroup, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: id})

	// The quota is full.
	_, err := w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: "d", CapacityRange: &csi.CapacityRange{RequiredBytes: mib}, VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.ResourceExhausted)

	// Deleting the group deletes its volumes in the appliance; the ledger forgets them.
	w.must("blue", deleteVolumeGroup, &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: id})
	for _, v := range []string{v1, v3} {
		if _, err := w.raw(getVolume, &csi.ControllerGetVolumeRequest{VolumeId: unscope(t, "blue", v)}); status.Code(err) != codes.NotFound {
			t.Errorf("the appliance still has member %s: %v", v, err)
		}
		if _, ok, _ := w.ledger.Lookup(t.Context(), Volume, unscope(t, "blue", v)); ok {
			t.Errorf("the ledger still has member %s", v)
		}
	}
	if _, ok, _ := w.ledger.Lookup(t.Context(), VolumeGroup, unscope(t, "blue", id)); ok {
		t.Error("the ledger still has the group")
	}
	w.must("blue", getVolume, &csi.ControllerGetVolumeRequest{VolumeId: v2}) // left the group before
	if u := w.ledger.usageNow("blue"); u != (usage{volumes: 1, bytes: 10 * mib}) {
		t.Errorf("blue's usage after the group's delete = %+v; want 1 volume, 10 MiB", u)
	}
	w.createVolume("blue", "d", 10*mib)
	w.createVolume("blue", "e", 10*mib)
	// Green's group and volume are untouched.
	w.must("green", getVolumeGroup, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: greenGroup})
	w.must("green", getVolume, &csi.ControllerGetVolumeRequest{VolumeId: green})
	// Deleting it again is OK.
	w.must("blue", deleteVolumeGroup, &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: id})
}

func TestLongNames(t *testing.T) {
	w := newWorld(t, nil)
	base := strings.Repeat("n", 100)
	long1, long2 := base+strings.Repeat("1", 28), base+strings.Repeat("2", 28) // 128 bytes each
	a := w.createVolume("blue", long1, mib)
	b := w.createVolume("blue", long2, mib)
	if a == b {
		t.Fatal("two long names that share their beginning are one volume")
	}
	if again := w.createVolume("blue", long1, mib); again != a {
		t.Errorf("a retry with a long name returned %s, want %s", again, a)
	}
	scoped, _ := ScopeName("blue", long1)
	if id, ok, _ := w.ledger.ByName(t.Context(), Volume, scoped); !ok || id != unscope(t, "blue", a) {
		t.Errorf("the ledger has %q as %q, %t", scoped, id, ok)
	}
	if u := w.ledger.usageNow("blue"); u.volumes != 2 {
		t.Errorf("blue holds %d volumes", u.volumes)
	}
	// A name over CSI's limit: INVALID_ARGUMENT, and nothing reaches the appliance.
	before := w.rec.count()
	_, err := w.call("blue", createVolume, &csi.CreateVolumeRequest{Name: long1 + "x", VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	wantCode(t, err, codes.InvalidArgument, "128")
	_, err = w.call("blue", createSnapshot, &csi.CreateSnapshotRequest{Name: long1 + "x", SourceVolumeId: a})
	wantCode(t, err, codes.InvalidArgument, "128")
	if reached := w.rec.since(before); len(reached) > 0 {
		t.Errorf("an over-long name reached the appliance: %v", reached)
	}
	if n := len(w.backendVolumes()); n != 2 {
		t.Errorf("the appliance holds %d volumes", n)
	}
	// Long snapshot and group names work the same way.
	s := w.createSnapshot("blue", long1, a)
	if again := w.createSnapshot("blue", long1, a); again != s {
		t.Errorf("a retry of a long snapshot name returned %s, want %s", again, s)
	}
}

func TestCrashHealing(t *testing.T) {
	w := newWorld(t, map[string]Quota{"blue": {MaxVolumes: 1}})
	// The appliance created blue's volume but the gateway died before recording it.
	resp, err := w.raw(createVolume, &csi.CreateVolumeRequest{Name: "blue.pvc", CapacityRange: &csi.CapacityRange{RequiredBytes: mib}, VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	if err != nil {
		t.Fatal(err)
	}
	backendID := resp.(*csi.CreateVolumeResponse).GetVolume().GetVolumeId()
	// The orchestrator's retry returns it and records it.
	id := w.createVolume("blue", "pvc", mib)
	if id != "blue."+backendID {
		t.Fatalf("the retry returned %s, want blue.%s", id, backendID)
	}
	if u := w.ledger.usageNow("blue"); u != (usage{volumes: 1, bytes: mib}) {
		t.Errorf("blue's usage = %+v", u)
	}

	// The appliance deleted a volume but the gateway died before forgetting it.
	if _, err := w.raw(deleteVolume, &csi.DeleteVolumeRequest{VolumeId: backendID}); err != nil {
		t.Fatal(err)
	}
	w.must("blue", deleteVolume, &csi.DeleteVolumeRequest{VolumeId: id})
	if _, ok, _ := w.ledger.Lookup(t.Context(), Volume, backendID); ok {
		t.Error("the retried delete did not forget the volume")
	}
	if u := w.ledger.usageNow("blue"); u != (usage{}) {
		t.Errorf("blue's usage = %+v", u)
	}
	w.createVolume("blue", "other", mib)
}

func TestGatewayRestart(t *testing.T) {
	// The ledger outlives the gateway: after reopening, ownership and quotas hold.
	path := filepath.Join(t.TempDir(), "tenancy.db")
	quotas := map[string]Quota{"blue": {MaxVolumes: 1}}
	l, err := Open(path, quotas)
	if err != nil {
		t.Fatal(err)
	}
	back := openAppliance(t, t.TempDir())
	inv := invokerOf(back, nil)
	resp, err := l.Handle(t.Context(), "blue", createVolume, &csi.CreateVolumeRequest{Name: "a", VolumeCapabilities: []*csi.VolumeCapability{rwo}}, inv)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.(*csi.CreateVolumeResponse).GetVolume().GetVolumeId()
	l.Close()

	l = openLedger(t, path, quotas)
	if _, err := l.Handle(t.Context(), "blue", getVolume, &csi.ControllerGetVolumeRequest{VolumeId: id}, inv); err != nil {
		t.Errorf("blue's volume after a restart: %v", err)
	}
	_, err = l.Handle(t.Context(), "green", getVolume, &csi.ControllerGetVolumeRequest{VolumeId: "green." + unscope(t, "blue", id)}, inv)
	wantCode(t, err, codes.NotFound)
	_, err = l.Handle(t.Context(), "blue", createVolume, &csi.CreateVolumeRequest{Name: "b", VolumeCapabilities: []*csi.VolumeCapability{rwo}}, inv)
	wantCode(t, err, codes.ResourceExhausted)
}

func TestScopeRequestStreaming(t *testing.T) {
	w := newWorld(t, nil)
	v := w.createVolume("blue", "a", mib)
	s1, s2 := w.createSnapshot("blue", "s1", v), w.createSnapshot("blue", "s2", v)
	green := w.createSnapshot("green", "s", w.createVolume("green", "a", mib))

	req := &csi.GetMetadataDeltaRequest{BaseSnapshotId: s1, TargetSnapshotId: s2, MaxResults: 10}
	if err := w.ledger.ScopeRequest(t.Context(), "blue", metadataDelta, req); err != nil {
		t.Fatal(err)
	}
	if req.GetBaseSnapshotId() != unscope(t, "blue", s1) || req.GetTargetSnapshotId() != unscope(t, "blue", s2) || req.GetMaxResults() != 10 {
		t.Errorf("the scoped request: %v", req)
	}
	for _, r := range []proto.Message{
		&csi.GetMetadataDeltaRequest{BaseSnapshotId: s1, TargetSnapshotId: "blue." + unscope(t, "green", green)},
		&csi.GetMetadataDeltaRequest{BaseSnapshotId: green, TargetSnapshotId: s1},
		&csi.GetMetadataAllocatedRequest{SnapshotId: unscope(t, "green", green)},
	} {
		method := metadataDelta
		if _, ok := r.(*csi.GetMetadataAllocatedRequest); ok {
			method = metadataAllocated
		}
		wantCode(t, w.ledger.ScopeRequest(t.Context(), "blue", method, r), codes.NotFound)
	}
}

func TestExpandRecordsSize(t *testing.T) {
	w := newWorld(t, map[string]Quota{"blue": {MaxBytes: 100 * mib}})
	a := w.createVolume("blue", "a", 10*mib)
	w.must("blue", expandVolume, &csi.ControllerExpandVolumeRequest{VolumeId: a, CapacityRange: &csi.CapacityRange{RequiredBytes: 40 * mib}})
	if r, _, _ := w.ledger.Lookup(t.Context(), Volume, unscope(t, "blue", a)); r.Bytes != 40*mib || r.Name != "blue.a" {
		t.Errorf("the record after expansion: %+v", r)
	}
	// A smaller request (a volume cannot shrink) changes nothing.
	w.must("blue", expandVolume, &csi.ControllerExpandVolumeRequest{VolumeId: a, CapacityRange: &csi.CapacityRange{RequiredBytes: 20 * mib}})
	if u := w.ledger.usageNow("blue"); u != (usage{volumes: 1, bytes: 40 * mib}) {
		t.Errorf("blue's usage = %+v", u)
	}
	// The name survives the expansion: a retry of the create is still a retry.
	if _, ok, _ := w.ledger.ByName(t.Context(), Volume, "blue.a"); !ok {
		t.Error("the expansion lost the volume's name")
	}
}

// TestUnpublishOfAbsentVolumeIsOK: the gateway answers ControllerUnpublishVolume (and
// NodeUnstage/NodeUnpublish) of a volume that does not exist with OK (csispec's errorRules: NOT_FOUND
// would make Kubernetes retry the detach forever). Tenancy runs outside canonicalize and
// answers NOT_FOUND for a volume the tenant no longer owns, such as one it deleted.
func TestUnpublishOfAbsentVolumeIsOK(t *testing.T) {
	w := newWorld(t, nil)
	v := w.createVolume("blue", "a", mib)
	w.must("blue", deleteVolume, &csi.DeleteVolumeRequest{VolumeId: v})
	// Without tenancy: OK.
	if _, err := w.raw(unpublishVolume, &csi.ControllerUnpublishVolumeRequest{VolumeId: unscope(t, "blue", v), NodeId: "node-1"}); err != nil {
		t.Fatalf("the appliance: %v", err)
	}
	for _, c := range []struct {
		method string
		req    proto.Message
	}{
		{unpublishVolume, &csi.ControllerUnpublishVolumeRequest{VolumeId: v, NodeId: "node-1"}},
		{"/csi.v1.Node/NodeUnstageVolume", &csi.NodeUnstageVolumeRequest{VolumeId: v, StagingTargetPath: "/mnt/s"}},
		{"/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: v, TargetPath: "/mnt/t"}},
	} {
		if _, err := w.call("blue", c.method, c.req); err != nil {
			t.Errorf("%s of a deleted volume through tenancy: %v; want OK", c.method, err)
		}
	}
}
