package csp

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp/cspfake"
)

// Volume groups (csi-addons) are CSP volume groups; a group snapshot is a CSP snapshot group,
// so it must name exactly one group's volumes.
func TestGroupsMapOntoCSPGroups(t *testing.T) {
	r := newRig(t, cspfake.ProfileSpec)
	var ids []string
	for _, n := range []string{"pvc-g1", "pvc-g2", "pvc-loner"} {
		v, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq(n))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.GetVolume().GetVolumeId())
	}
	g, err := call[*volumegroup.CreateVolumeGroupResponse](t, r, "/volumegroup.Controller/CreateVolumeGroup",
		&volumegroup.CreateVolumeGroupRequest{Name: "group-a", VolumeIds: ids[:2]})
	if err != nil {
		t.Fatal(err)
	}
	gid := g.GetVolumeGroup().GetVolumeGroupId()
	if n := len(g.GetVolumeGroup().GetVolumes()); n != 2 {
		t.Fatalf("the group has %d volumes, want 2", n)
	}
	again, err := call[*volumegroup.CreateVolumeGroupResponse](t, r, "/volumegroup.Controller/CreateVolumeGroup",
		&volumegroup.CreateVolumeGroupRequest{Name: "group-a", VolumeIds: ids[:2]})
	if err != nil || again.GetVolumeGroup().GetVolumeGroupId() != gid || r.fake.Counters().VolumeGroups != 1 {
		t.Fatalf("a retried CreateVolumeGroup: %v, %v; %d groups", again, err, r.fake.Counters().VolumeGroups)
	}

	const createGS = "/csi.v1.GroupController/CreateVolumeGroupSnapshot"
	_, err = call[*csi.CreateVolumeGroupSnapshotResponse](t, r, createGS, &csi.CreateVolumeGroupSnapshotRequest{Name: "gs-part", SourceVolumeIds: ids[:1]})
	wantClass(t, err, backends.ClassInvalid)
	_, err = call[*csi.CreateVolumeGroupSnapshotResponse](t, r, createGS, &csi.CreateVolumeGroupSnapshotRequest{Name: "gs-mixed", SourceVolumeIds: ids[1:]})
	wantClass(t, err, backends.ClassPrecondition)
	gs, err := call[*csi.CreateVolumeGroupSnapshotResponse](t, r, createGS, &csi.CreateVolumeGroupSnapshotRequest{Name: "gs-a", SourceVolumeIds: ids[:2]})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(gs.GetGroupSnapshot().GetSnapshots()); n != 2 {
		t.Errorf("the group snapshot has %d snapshots, want 2", n)
	}
	for _, s := range gs.GetGroupSnapshot().GetSnapshots() {
		if s.GetGroupSnapshotId() != gs.GetGroupSnapshot().GetGroupSnapshotId() {
			t.Errorf("snapshot %s does not name its group snapshot", s.GetSnapshotId())
		}
	}
	if _, err := call[*csi.DeleteVolumeGroupSnapshotResponse](t, r, "/csi.v1.GroupController/DeleteVolumeGroupSnapshot",
		&csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gs.GetGroupSnapshot().GetGroupSnapshotId()}); err != nil {
		t.Fatal(err)
	}

	// A group with volumes is not deleted (no volume is deleted as a side effect); emptied, it is.
	_, err = call[*volumegroup.DeleteVolumeGroupResponse](t, r, "/volumegroup.Controller/DeleteVolumeGroup", &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: gid})
	wantClass(t, err, backends.ClassPrecondition)
	if _, err := call[*volumegroup.ModifyVolumeGroupMembershipResponse](t, r, "/volumegroup.Controller/ModifyVolumeGroupMembership",
		&volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: gid}); err != nil {
		t.Fatal(err)
	}
	if _, err := call[*volumegroup.DeleteVolumeGroupResponse](t, r, "/volumegroup.Controller/DeleteVolumeGroup", &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: gid}); err != nil {
		t.Fatal(err)
	}
	if c := r.fake.Counters(); c.VolumeGroups != 0 || c.Volumes != 3 || c.Snapshots != 0 {
		t.Errorf("counters %+v: want no group, the 3 volumes, no snapshot", c)
	}
}

// A clone of a volume goes through a snapshot whose name derives from the clone's: a retry
// makes no second one, it is hidden from ListSnapshots, and deleting the source after the
// clone deletes it too.
func TestCloneThroughDerivedSnapshot(t *testing.T) {
	r := newRig(t, cspfake.ProfileHPE)
	src, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-src"))
	if err != nil {
		t.Fatal(err)
	}
	clone := createReq("pvc-clone")
	clone.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src.GetVolume().GetVolumeId()}}}
	first, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, clone)
	if err != nil {
		t.Fatal(err)
	}
	again, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, clone)
	if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
		t.Fatalf("a retried clone: %v, %v", again, err)
	}
	if c := r.fake.Counters(); c.Volumes != 2 || c.Snapshots != 1 {
		t.Errorf("counters %+v: want 2 volumes and 1 snapshot", c)
	}
	list, err := call[*csi.ListSnapshotsResponse](t, r, "/csi.v1.Controller/ListSnapshots", &csi.ListSnapshotsRequest{})
	if err != nil || len(list.GetEntries()) != 0 {
		t.Errorf("ListSnapshots shows the clone's source snapshot: %v, %v", list, err)
	}
	// The source cannot go while the clone depends on it.
	_, err = call[*csi.DeleteVolumeResponse](t, r, deleteVolumeMethod, &csi.DeleteVolumeRequest{VolumeId: src.GetVolume().GetVolumeId()})
	wantClass(t, err, backends.ClassPrecondition)
	for _, id := range []string{first.GetVolume().GetVolumeId(), src.GetVolume().GetVolumeId()} {
		if _, err := call[*csi.DeleteVolumeResponse](t, r, deleteVolumeMethod, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatalf("DeleteVolume %s: %v", id, err)
		}
	}
	if c := r.fake.Counters(); c.Volumes != 0 || c.Snapshots != 0 {
		t.Errorf("counters %+v after deleting both: want nothing left", c)
	}
}
