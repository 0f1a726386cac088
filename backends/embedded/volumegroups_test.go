package embedded

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
)

// groupVolumeIDs returns the IDs of a group's volumes, sorted.
func grpVolumeIDs(vg *volumegroup.VolumeGroup) []string {
	var ids []string
	for _, v := range vg.GetVolumes() {
		ids = append(ids, v.GetVolumeId())
	}
	slices.Sort(ids)
	return ids
}

func grpSorted(ids ...string) []string {
	return slices.Sorted(slices.Values(ids))
}

// grpGroupOf returns the GroupID the state records for volume id.
func grpGroupOf(a *Appliance, id string) string {
	var g string
	a.view(func(s *state) error {
		if v := s.Volumes[id]; v != nil {
			g = v.GroupID
		}
		return nil
	})
	return g
}

func TestVolumeGroupCreate(t *testing.T) {
	a := openTest(t, Config{})
	vgs := &volumeGroupServer{a: a}
	ctx := context.Background()
	v1, v2, v3 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2"), grpVolume(t, a, "v3")
	other, err := vgs.CreateVolumeGroup(ctx, &volumegroup.CreateVolumeGroupRequest{Name: "other", VolumeIds: []string{v3}})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{"description": "orders database"}
	first, err := vgs.CreateVolumeGroup(ctx, &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: params})
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetVolumeGroup().GetVolumeGroupId()
	if id == "" || len(first.GetVolumeGroup().GetVolumes()) != 0 {
		t.Fatalf("new empty group = %v", first.GetVolumeGroup())
	}

	tests := []struct {
		name      string
		req       *volumegroup.CreateVolumeGroupRequest
		code      codes.Code
		fragments []string
		members   []string // of "db" afterwards, when the call succeeds
	}{
		{"no name", &volumegroup.CreateVolumeGroupRequest{}, codes.InvalidArgument, []string{"name is required"}, nil},
		{"name over 128 bytes", &volumegroup.CreateVolumeGroupRequest{Name: strings.Repeat("n", 129)}, codes.InvalidArgument, []string{"at most 128"}, nil},
		{"control character in name", &volumegroup.CreateVolumeGroupRequest{Name: "d\x7fb"}, codes.InvalidArgument, []string{"U+007F"}, nil},
		{"unknown parameter", &volumegroup.CreateVolumeGroupRequest{Name: "x", Parameters: map[string]string{"replication": "async"}}, codes.InvalidArgument, []string{`"replication"`, "description"}, nil},
		{"empty volume id", &volumegroup.CreateVolumeGroupRequest{Name: "x", VolumeIds: []string{""}}, codes.InvalidArgument, []string{"volume_ids[0] is required"}, nil},
		{"volume twice", &volumegroup.CreateVolumeGroupRequest{Name: "x", VolumeIds: []string{v1, v1}}, codes.InvalidArgument, []string{"twice"}, nil},
		{"missing volume", &volumegroup.CreateVolumeGroupRequest{Name: "x", VolumeIds: []string{v1, "vol-nope"}}, codes.NotFound, []string{"vol-nope"}, nil},
		{"volume of another group", &volumegroup.CreateVolumeGroupRequest{Name: "x", VolumeIds: []string{v1, v3}}, codes.FailedPrecondition, []string{v3, other.GetVolumeGroup().GetVolumeGroupId()}, nil},
		{"other parameters", &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: map[string]string{"description": "other"}}, codes.AlreadyExists, []string{"db", id}, nil},
		{"no parameters", &volumegroup.CreateVolumeGroupRequest{Name: "db"}, codes.AlreadyExists, []string{"parameters"}, nil},
		{"same arguments", &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: params}, codes.OK, nil, nil},
		{"same parameters, volumes to add", &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: params, VolumeIds: []string{v1}}, codes.OK, nil, []string{v1}},
		{"repeated with volumes", &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: params, VolumeIds: []string{v1}}, codes.OK, nil, []string{v1}},
		{"more volumes", &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: params, VolumeIds: []string{v2}}, codes.OK, nil, grpSorted(v1, v2)},
		{"existing group, volume of another group", &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: params, VolumeIds: []string{v3}}, codes.FailedPrecondition, []string{v3}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := vgs.CreateVolumeGroup(ctx, tt.req)
			wantCode(t, err, tt.code, tt.fragments...)
			if tt.code == codes.OK {
				if got := resp.GetVolumeGroup(); got.GetVolumeGroupId() != id || !slices.Equal(grpVolumeIDs(got), tt.members) {
					t.Errorf("got %v, want group %s with %v", got, id, tt.members)
				}
			}
		})
	}
	a.view(func(s *state) error {
		if len(s.Groups) != 2 {
			t.Errorf("state holds %d groups, want 2", len(s.Groups))
		}
		return nil
	})
	if g := grpGroupOf(a, v3); g != other.GetVolumeGroup().GetVolumeGroupId() {
		t.Errorf("refused calls moved %s to group %q", v3, g)
	}
}

func TestVolumeGroupModifyMembership(t *testing.T) {
	a := openTest(t, Config{})
	vgs := &volumeGroupServer{a: a}
	ctx := context.Background()
	v1, v2, v3, v4 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2"), grpVolume(t, a, "v3"), grpVolume(t, a, "v4")
	resp, err := vgs.CreateVolumeGroup(ctx, &volumegroup.CreateVolumeGroupRequest{Name: "db"})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetVolumeGroup().GetVolumeGroupId()
	other, err := vgs.CreateVolumeGroup(ctx, &volumegroup.CreateVolumeGroupRequest{Name: "other", VolumeIds: []string{v4}})
	if err != nil {
		t.Fatal(err)
	}
	otherID := other.GetVolumeGroup().GetVolumeGroupId()

	// Steps run in order; a refused step must leave the membership of the step before.
	steps := []struct {
		name      string
		req       *volumegroup.ModifyVolumeGroupMembershipRequest
		code      codes.Code
		fragments []string
		members   []string
	}{
		{"add two", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v1, v2}}, codes.OK, nil, grpSorted(v1, v2)},
		{"repeat", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v2, v1}}, codes.OK, nil, grpSorted(v1, v2)},
		{"no group id", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeIds: []string{v1}}, codes.InvalidArgument, []string{"volume_group_id is required"}, grpSorted(v1, v2)},
		{"unknown group", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: "vg-nope", VolumeIds: []string{v1}}, codes.NotFound, []string{"vg-nope"}, grpSorted(v1, v2)},
		{"unknown volume", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v3, "vol-nope"}}, codes.NotFound, []string{"vol-nope"}, grpSorted(v1, v2)},
		{"volume of another group", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v3, v4}}, codes.InvalidArgument, []string{v4, otherID}, grpSorted(v1, v2)},
		{"volume twice", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v3, v3}}, codes.InvalidArgument, []string{"twice"}, grpSorted(v1, v2)},
		{"unknown parameter", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v3}, Parameters: map[string]string{"replication": "async"}}, codes.InvalidArgument, []string{`"replication"`}, grpSorted(v1, v2)},
		{"swap one", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v2, v3}, Parameters: map[string]string{"description": "db"}}, codes.OK, nil, grpSorted(v2, v3)},
		{"empty list removes all", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id}, codes.OK, nil, nil},
		{"empty again", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id}, codes.OK, nil, nil},
		{"refill", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id, VolumeIds: []string{v1}}, codes.OK, nil, []string{v1}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			resp, err := vgs.ModifyVolumeGroupMembership(ctx, st.req)
			wantCode(t, err, st.code, st.fragments...)
			if st.code == codes.OK && !slices.Equal(grpVolumeIDs(resp.GetVolumeGroup()), st.members) {
				t.Errorf("response lists %v, want %v", grpVolumeIDs(resp.GetVolumeGroup()), st.members)
			}
			got, err := vgs.ControllerGetVolumeGroup(ctx, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: id})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(grpVolumeIDs(got.GetVolumeGroup()), st.members) {
				t.Errorf("group holds %v, want %v", grpVolumeIDs(got.GetVolumeGroup()), st.members)
			}
		})
	}
	for vol, want := range map[string]string{v1: id, v2: "", v3: "", v4: otherID} {
		if g := grpGroupOf(a, vol); g != want {
			t.Errorf("volume %s is in group %q, want %q", vol, g, want)
		}
	}
	a.view(func(s *state) error {
		if got := s.Groups[id].Parameters["description"]; got != "db" {
			t.Errorf("parameters given to Modify were not recorded: description = %q", got)
		}
		return nil
	})

	// A member cannot be deleted alone; once out of the group it can.
	c := &controllerServer{a: a}
	_, err = c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v1})
	wantCode(t, err, codes.FailedPrecondition, v1, id)
	if _, err := vgs.ModifyVolumeGroupMembership(ctx, &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v1}); err != nil {
		t.Errorf("DeleteVolume after leaving the group: %v", err)
	}
}

func TestVolumeGroupDelete(t *testing.T) {
	a := openTest(t, Config{})
	vgs, c := &volumeGroupServer{a: a}, &controllerServer{a: a}
	ctx := context.Background()
	v1, v2, outside := grpVolume(t, a, "v1"), grpVolume(t, a, "v2"), grpVolume(t, a, "outside")
	resp, err := vgs.CreateVolumeGroup(ctx, &volumegroup.CreateVolumeGroupRequest{Name: "db", VolumeIds: []string{v1, v2}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetVolumeGroup().GetVolumeGroupId()
	snap, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "before", SourceVolumeId: v2})
	if err != nil {
		t.Fatal(err)
	}
	grpPublish(t, a, v2, true)

	tests := []struct {
		name      string
		req       *volumegroup.DeleteVolumeGroupRequest
		code      codes.Code
		fragments []string
	}{
		{"no id", &volumegroup.DeleteVolumeGroupRequest{}, codes.InvalidArgument, []string{"volume_group_id is required"}},
		{"unknown id", &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: "vg-nope"}, codes.OK, nil},
		{"member published", &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: id}, codes.FailedPrecondition, []string{v2, a.cfg.NodeID, "unpublish"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := vgs.DeleteVolumeGroup(ctx, tt.req)
			wantCode(t, err, tt.code, tt.fragments...)
		})
	}
	got, err := vgs.ControllerGetVolumeGroup(ctx, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: id})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(grpVolumeIDs(got.GetVolumeGroup()), grpSorted(v1, v2)) {
		t.Errorf("refused delete changed the group to %v", grpVolumeIDs(got.GetVolumeGroup()))
	}
	grpCheckFiles(t, a)

	if _, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v2}); err != nil {
		t.Fatal(err)
	}
	if _, err := vgs.DeleteVolumeGroup(ctx, &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: id}); err != nil {
		t.Fatal(err)
	}
	_, err = vgs.ControllerGetVolumeGroup(ctx, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: id})
	wantCode(t, err, codes.NotFound, id)
	vols, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vols.GetEntries()) != 1 || vols.GetEntries()[0].GetVolume().GetVolumeId() != outside {
		t.Errorf("after deleting the group ListVolumes = %v, want only %s", vols.GetEntries(), outside)
	}
	for _, v := range []string{v1, v2} {
		if _, err := os.Stat(a.images.volumePath(v)); !os.IsNotExist(err) {
			t.Errorf("image of deleted member %s: %v", v, err)
		}
	}
	grpCheckFiles(t, a)
	// Snapshots are independent copies: they outlive the group and still seed volumes.
	src := &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}}
	if _, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{rwo}, VolumeContentSource: src}); err != nil {
		t.Errorf("restore from a deleted member's snapshot: %v", err)
	}
	if _, err := vgs.DeleteVolumeGroup(ctx, &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: id}); err != nil {
		t.Errorf("repeated delete: %v", err)
	}
}

func TestVolumeGroupGetAndList(t *testing.T) {
	a := openTest(t, Config{})
	vgs := &volumeGroupServer{a: a}
	ctx := context.Background()
	v1 := grpVolume(t, a, "v1")
	var ids []string
	for i, name := range []string{"a", "b", "c"} {
		req := &volumegroup.CreateVolumeGroupRequest{Name: name}
		if i == 1 {
			req.VolumeIds = []string{v1}
		}
		resp, err := vgs.CreateVolumeGroup(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.GetVolumeGroup().GetVolumeGroupId())
	}

	gets := []struct {
		name string
		id   string
		code codes.Code
		frag []string
	}{
		{"no id", "", codes.InvalidArgument, []string{"volume_group_id is required"}},
		{"unknown id", "vg-nope", codes.NotFound, []string{"vg-nope"}},
		{"known id", ids[1], codes.OK, nil},
	}
	for _, tt := range gets {
		t.Run("get "+tt.name, func(t *testing.T) {
			resp, err := vgs.ControllerGetVolumeGroup(ctx, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: tt.id})
			wantCode(t, err, tt.code, tt.frag...)
			if tt.code == codes.OK {
				vols := resp.GetVolumeGroup().GetVolumes()
				if len(vols) != 1 || vols[0].GetVolumeId() != v1 || vols[0].GetCapacityBytes() != 1<<20 || len(vols[0].GetAccessibleTopology()) != 1 {
					t.Errorf("volumes = %v, want %s as a csi.Volume", vols, v1)
				}
			}
		})
	}

	// Page through with max_entries 2: a, b, then c.
	var seen []string
	var pages int
	token := ""
	for {
		resp, err := vgs.ListVolumeGroups(ctx, &volumegroup.ListVolumeGroupsRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range resp.GetEntries() {
			seen = append(seen, e.GetVolumeGroup().GetVolumeGroupId())
			if e.GetVolumeGroup().GetVolumeGroupId() == ids[1] && len(e.GetVolumeGroup().GetVolumes()) != 1 {
				t.Errorf("listed group %s without its volume", ids[1])
			}
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	if pages != 2 || !slices.Equal(seen, ids) {
		t.Errorf("paging saw %v in %d pages, want %v in 2", seen, pages, ids)
	}
	all, err := vgs.ListVolumeGroups(ctx, &volumegroup.ListVolumeGroupsRequest{})
	if err != nil || len(all.GetEntries()) != 3 || all.GetNextToken() != "" {
		t.Errorf("unpaged list: %v, %v", all, err)
	}

	volumesToken := encodeToken("volumes", 1)
	lists := []struct {
		name string
		req  *volumegroup.ListVolumeGroupsRequest
		code codes.Code
	}{
		{"garbage token", &volumegroup.ListVolumeGroupsRequest{StartingToken: "not-a-token"}, codes.Aborted},
		{"ListVolumes token", &volumegroup.ListVolumeGroupsRequest{StartingToken: volumesToken}, codes.Aborted},
		{"negative max_entries", &volumegroup.ListVolumeGroupsRequest{MaxEntries: -1}, codes.InvalidArgument},
	}
	for _, tt := range lists {
		t.Run("list "+tt.name, func(t *testing.T) {
			_, err := vgs.ListVolumeGroups(ctx, tt.req)
			wantCode(t, err, tt.code)
		})
	}
}

func TestVolumeGroupSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(Config{DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2")
	params := map[string]string{"description": "kept"}
	resp, err := (&volumeGroupServer{a: a}).CreateVolumeGroup(context.Background(), &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: params, VolumeIds: []string{v1, v2}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetVolumeGroup().GetVolumeGroupId()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	a, err = Open(Config{DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	vgs := &volumeGroupServer{a: a}
	got, err := vgs.ControllerGetVolumeGroup(context.Background(), &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: id})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(grpVolumeIDs(got.GetVolumeGroup()), grpSorted(v1, v2)) {
		t.Errorf("after reopening the group holds %v, want %v", grpVolumeIDs(got.GetVolumeGroup()), grpSorted(v1, v2))
	}
	again, err := vgs.CreateVolumeGroup(context.Background(), &volumegroup.CreateVolumeGroupRequest{Name: "db", Parameters: params})
	if err != nil || again.GetVolumeGroup().GetVolumeGroupId() != id {
		t.Errorf("repeat after reopening: %v, %v", again, err)
	}
	_, err = vgs.CreateVolumeGroup(context.Background(), &volumegroup.CreateVolumeGroupRequest{Name: "db"})
	wantCode(t, err, codes.AlreadyExists, "db")
	grpCheckFiles(t, a)
}
