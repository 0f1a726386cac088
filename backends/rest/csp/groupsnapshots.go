package csp

import (
	"context"
	"net/http"
	"net/url"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csi-gateway/csi-gateway/backends"
)

// createVolumeGroupSnapshot: a CSP snapshots a whole volume group at once, so the source
// volumes must be exactly the members of one volume group (FAILED_PRECONDITION when they
// are in none or several, INVALID_ARGUMENT when they are only part of one). Volumes are never
// moved into an ad-hoc group: on an array a volume belongs to one group, whose protection
// schedule moving it would break. A snapshot group of that name is looked up first.
func (b *Backend) createVolumeGroupSnapshot(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	rpc := "CreateVolumeGroupSnapshot"
	if !b.profile.groups {
		return nil, b.errorf(backends.ClassUnimplemented, rpc, "a %s CSP has no snapshot groups", b.profile.name)
	}
	groupID := ""
	for _, id := range req.GetSourceVolumeIds() {
		v, err := b.mustGetVolume(ctx, rpc, id)
		if err != nil {
			return nil, err
		}
		switch {
		case v.VolumeGroupID == "":
			return nil, b.errorf(backends.ClassPrecondition, rpc, "volume %q is in no volume group; a CSP snapshots whole volume groups only", id)
		case groupID != "" && v.VolumeGroupID != groupID:
			return nil, b.errorf(backends.ClassPrecondition, rpc, "the source volumes are in different volume groups; a CSP snapshots one whole volume group")
		}
		groupID = v.VolumeGroupID
	}
	g, err := mustFind(ctx, b, rpc, "volume group", groupID, b.getVolumeGroup)
	if err != nil {
		return nil, err
	}
	var members []string
	for _, m := range g.Volumes {
		members = append(members, m.ID)
	}
	slices.Sort(members)
	if sources := slices.Sorted(slices.Values(req.GetSourceVolumeIds())); !slices.Equal(members, slices.Compact(sources)) {
		return nil, b.errorf(backends.ClassInvalid, rpc, "the source volumes are part of volume group %q, which has %d volumes; a CSP snapshots the whole group: name all its volumes", groupID, len(members))
	}
	var existing []snapshotGroup
	if _, err := b.get(ctx, rpc, "/snapshot_groups", url.Values{"volume_group_id": {groupID}}, &existing); err != nil {
		return nil, err
	}
	for _, sg := range existing {
		if sg.Name == b.cspName(req.GetName()) {
			return b.groupSnapshotResponse(rpc, sg)
		}
	}
	var created snapshotGroup
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPost, path: "/snapshot_groups",
		body: snapshotGroup{Name: b.cspName(req.GetName()), VolumeGroupID: groupID}}, &created)
	if err != nil {
		return nil, err
	}
	if a.status != http.StatusOK {
		return nil, b.classify(rpc, a)
	}
	return b.groupSnapshotResponse(rpc, created)
}

func (b *Backend) groupSnapshotResponse(rpc string, sg snapshotGroup) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	gs, err := b.csiGroupSnapshot(rpc, sg)
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: gs}, nil
}

// csiGroupSnapshot is a CSP snapshot group as CSI describes it.
func (b *Backend) csiGroupSnapshot(rpc string, sg snapshotGroup) (*csi.VolumeGroupSnapshot, error) {
	gs := &csi.VolumeGroupSnapshot{GroupSnapshotId: sg.ID, ReadyToUse: true, CreationTime: timestamppb.Now()}
	if sg.CreationTime > 0 {
		gs.CreationTime = timestamppb.New(unixTime(int64(sg.CreationTime)))
	}
	for _, s := range sg.Snapshots {
		snap, err := b.csiSnapshot(rpc, s)
		if err != nil {
			return nil, err
		}
		snap.GroupSnapshotId = sg.ID
		gs.ReadyToUse = gs.ReadyToUse && snap.ReadyToUse
		gs.Snapshots = append(gs.Snapshots, snap)
	}
	return gs, nil
}

func (b *Backend) deleteVolumeGroupSnapshot(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	rpc := "DeleteVolumeGroupSnapshot"
	if err := b.remove(ctx, rpc, "/snapshot_groups/"+url.PathEscape(req.GetGroupSnapshotId())); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}

func (b *Backend) getVolumeGroupSnapshot(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	rpc := "GetVolumeGroupSnapshot"
	sg, err := mustFind(ctx, b, rpc, "group snapshot", req.GetGroupSnapshotId(), b.getSnapshotGroup)
	if err != nil {
		return nil, err
	}
	gs, err := b.csiGroupSnapshot(rpc, sg)
	if err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: gs}, nil
}
