package embedded

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// groupControllerServer is the CSI GroupController service: group snapshots, made of one
// ordinary snapshot per source volume. Each member snapshot carries the ID of its group
// snapshot, is listed by ListSnapshots and may seed a new volume, but is deleted only with its
// group (DeleteSnapshot refuses it).
type groupControllerServer struct {
	csi.UnimplementedGroupControllerServer
	a *Appliance
}

// memberNameSeparator joins a group snapshot's name and a volume ID into the name of the
// member snapshot. U+001F is one of the control characters CSI bans from names, so no
// CreateSnapshot name can ever equal a member's name and pick it up as its own.
const memberNameSeparator = "\x1f"

func (g *groupControllerServer) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT,
		}},
	}}}, nil
}

// CreateVolumeGroupSnapshot cuts one snapshot of every source volume inside a single state
// change: either all members and the group snapshot are recorded, or none is and the images
// already copied are removed. A name seen before answers with the recorded group snapshot
// when the set of sources and the parameters are the same, ALREADY_EXISTS otherwise.
//
// The spec asks for write-order consistency across the members "or fail". The appliance
// copies images one after another and cannot freeze a node's writes, so it refuses
// (FAILED_PRECONDITION) when two or more sources are published read-write: only then can
// writes land on two members between their copies.
func (g *groupControllerServer) CreateVolumeGroupSnapshot(_ context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	if err := firstError(createGroupSnapshotChecks(req)...); err != nil {
		return nil, err
	}
	out, err := createWithImages(g.a, func(s *state, images *[]string) (*csi.VolumeGroupSnapshot, error) {
		if gs := byName(s.GroupSnapshots, req.GetName()); gs != nil {
			if err := groupSnapshotCompatible(s, gs, req); err != nil {
				return nil, err
			}
			return g.a.csiGroupSnapshot(s, gs), nil
		}
		if err := checkSnapshotTogether(s, req.GetSourceVolumeIds()); err != nil {
			return nil, err
		}
		gs := &groupSnapshot{
			ID:              newID("gsnap-"),
			Name:            req.GetName(),
			SourceVolumeIDs: slices.Clone(req.GetSourceVolumeIds()),
			CreatedAt:       time.Now().UTC(),
		}
		for _, volID := range gs.SourceVolumeIDs {
			sn, err := g.a.cutSnapshot(s, gs.Name+memberNameSeparator+volID, volID, gs.ID, images)
			if err != nil {
				return nil, err
			}
			sn.Parameters = maps.Clone(req.GetParameters())
			gs.SnapshotIDs = append(gs.SnapshotIDs, sn.ID)
		}
		s.GroupSnapshots[gs.ID] = gs
		return g.a.csiGroupSnapshot(s, gs), nil
	})
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: out}, nil
}

// groupSnapshotCompatible says why an existing group snapshot cannot answer a create request
// of the same name (ALREADY_EXISTS), or returns nil when it can. The parameters are kept on
// every member snapshot, as CreateSnapshot keeps them.
func groupSnapshotCompatible(s *state, gs *groupSnapshot, req *csi.CreateVolumeGroupSnapshotRequest) error {
	if !sameSet(gs.SourceVolumeIDs, req.GetSourceVolumeIds()) {
		return status.Errorf(codes.AlreadyExists, "group snapshot %q already exists as %s of volumes %v, not of %v; use another name", gs.Name, gs.ID, gs.SourceVolumeIDs, req.GetSourceVolumeIds())
	}
	var params map[string]string
	if len(gs.SnapshotIDs) > 0 && s.Snapshots[gs.SnapshotIDs[0]] != nil {
		params = s.Snapshots[gs.SnapshotIDs[0]].Parameters
	}
	if !maps.Equal(params, req.GetParameters()) {
		return status.Errorf(codes.AlreadyExists, "group snapshot %q already exists as %s with different parameters; use another name or the same arguments", gs.Name, gs.ID)
	}
	return nil
}

// checkSnapshotTogether fails with NOT_FOUND for a missing source volume, before anything is
// copied, and with FAILED_PRECONDITION when the copies could not be write-order consistent.
func checkSnapshotTogether(s *state, volIDs []string) error {
	var writable []string
	for _, id := range volIDs {
		v := s.Volumes[id]
		if v == nil {
			return notFound("source volume", id)
		}
		for node, p := range v.Publications {
			if !p.Readonly {
				writable = append(writable, fmt.Sprintf("%s on node %s", id, node))
				break
			}
		}
	}
	if len(writable) > 1 {
		slices.Sort(writable)
		return status.Errorf(codes.FailedPrecondition, "cannot snapshot these volumes together: %s are published read-write, and this appliance cannot hold their writes still to copy them at one point in time; unpublish them (or publish them read-only) and retry", strings.Join(writable, ", "))
	}
	return nil
}

func (g *groupControllerServer) DeleteVolumeGroupSnapshot(_ context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	id := req.GetGroupSnapshotId()
	return respond(&csi.DeleteVolumeGroupSnapshotResponse{}, deleteRecord(g.a, id, groupSnapshotsOf, func(s *state, gs *groupSnapshot) ([]string, error) {
		if err := checkMembers(gs, req.GetSnapshotIds()); err != nil {
			return nil, err
		}
		for _, snapID := range gs.SnapshotIDs {
			delete(s.Snapshots, snapID)
		}
		delete(s.GroupSnapshots, id)
		return gs.SnapshotIDs, nil
	}, "snapshot", g.a.images.snapshotPath, []any{"group_snapshot_id", id}, groupSnapshotChecks(req)...))
}

func (g *groupControllerServer) GetVolumeGroupSnapshot(_ context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	return getRecord(g.a, "group snapshot", req.GetGroupSnapshotId(), groupSnapshotsOf, func(s *state, gs *groupSnapshot) (*csi.GetVolumeGroupSnapshotResponse, error) {
		if err := checkMembers(gs, req.GetSnapshotIds()); err != nil {
			return nil, err
		}
		return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: g.a.csiGroupSnapshot(s, gs)}, nil
	}, groupSnapshotChecks(req)...)
}

// createGroupSnapshotChecks are the field checks of CreateVolumeGroupSnapshot, in order.
func createGroupSnapshotChecks(req *csi.CreateVolumeGroupSnapshotRequest) []error {
	return []error{
		checkName("name", req.GetName()),
		checkIDs("source_volume_ids", req.GetSourceVolumeIds(), true),
		checkParameters("parameters", req.GetParameters(), snapshotParameterKeys),
		checkMap("secrets", req.GetSecrets()),
	}
}

// groupSnapshotChecks are the field checks of DeleteVolumeGroupSnapshot and
// GetVolumeGroupSnapshot, in order.
func groupSnapshotChecks(req interface {
	GetGroupSnapshotId() string
	GetSnapshotIds() []string
	GetSecrets() map[string]string
}) []error {
	return []error{
		checkRequired("group_snapshot_id", req.GetGroupSnapshotId()),
		checkIDs("snapshot_ids", req.GetSnapshotIds(), false),
		checkMap("secrets", req.GetSecrets()),
	}
}

// checkMembers fails with INVALID_ARGUMENT ("snapshot list mismatch") when snapshot_ids is
// given and is not the group snapshot's set of members. The spec marks the field REQUIRED,
// but the appliance does not need it and csi-sanity sends none, so an empty list passes.
func checkMembers(gs *groupSnapshot, ids []string) error {
	if len(ids) == 0 || sameSet(gs.SnapshotIDs, ids) {
		return nil
	}
	return invalid("snapshot_ids %v do not match the snapshots %v of group snapshot %s; pass the group snapshot's own snapshot IDs", ids, gs.SnapshotIDs, gs.ID)
}

// csiGroupSnapshot renders a group snapshot with its members in creation order.
func (a *Appliance) csiGroupSnapshot(s *state, gs *groupSnapshot) *csi.VolumeGroupSnapshot {
	out := &csi.VolumeGroupSnapshot{
		GroupSnapshotId: gs.ID,
		CreationTime:    timestamppb.New(gs.CreatedAt),
		ReadyToUse:      true,
	}
	for _, id := range gs.SnapshotIDs {
		sn := s.Snapshots[id]
		if sn == nil {
			out.ReadyToUse = false // cannot happen: members leave only with their group
			continue
		}
		m := a.csiSnapshot(sn)
		out.Snapshots = append(out.Snapshots, m)
		out.ReadyToUse = out.ReadyToUse && m.GetReadyToUse()
	}
	return out
}

// checkIDs checks a list of object IDs: each present and within the size limit, none twice.
// required says whether the list itself may be empty.
func checkIDs(field string, ids []string, required bool) error {
	if required && len(ids) == 0 {
		return invalid("%s is required", field)
	}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if err := checkRequired(fmt.Sprintf("%s[%d]", field, i), id); err != nil {
			return err
		}
		if seen[id] {
			return invalid("%s lists %q twice", field, id)
		}
		seen[id] = true
	}
	return nil
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}
