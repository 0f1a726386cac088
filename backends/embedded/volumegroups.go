package embedded

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// volumeGroupServer is the csi-addons VolumeGroup controller. A group is a named record;
// its members are the volumes whose GroupID names it, so membership is stored once, on the
// volume. A volume belongs to at most one group, cannot be deleted while it is in one
// (DeleteVolume refuses), and is deleted with its group.
type volumeGroupServer struct {
	volumegroup.UnimplementedControllerServer
	a *Appliance
}

// Volume group parameters the appliance understands (recorded, reported nowhere else).
var volumeGroupParameterKeys = []string{"description"}

// CreateVolumeGroup creates a group, with the volumes in volume_ids as its first members. A
// name seen before answers with the recorded group when the parameters are the same (and
// adds the listed volumes that are not members yet, as volume_ids "will be added"),
// ALREADY_EXISTS otherwise. A listed volume that does not exist is NOT_FOUND; one that
// belongs to another group is FAILED_PRECONDITION ("volumes cannot be grouped together").
func (g *volumeGroupServer) CreateVolumeGroup(_ context.Context, req *volumegroup.CreateVolumeGroupRequest) (*volumegroup.CreateVolumeGroupResponse, error) {
	vg, err := g.changeGroup(func(s *state) (*volumeGroup, error) {
		vg := byName(s.Groups, req.GetName())
		if vg != nil && !maps.Equal(vg.Parameters, req.GetParameters()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume group %q already exists as %s with different parameters; use another name or the same arguments", vg.Name, vg.ID)
		}
		if vg == nil {
			vg = &volumeGroup{
				named:      s.newNamed("vg-", req.GetName()),
				Parameters: maps.Clone(req.GetParameters()),
				CreatedAt:  time.Now().UTC(),
			}
			s.Groups[vg.ID] = vg
		}
		return vg, join(s, vg, req.GetVolumeIds(), codes.FailedPrecondition)
	}, checkName("name", req.GetName()),
		checkParameters("parameters", req.GetParameters(), volumeGroupParameterKeys),
		checkIDs("volume_ids", req.GetVolumeIds(), false),
		checkMap("secrets", req.GetSecrets()))
	return respond(&volumegroup.CreateVolumeGroupResponse{VolumeGroup: vg}, err)
}

// ModifyVolumeGroupMembership makes volume_ids the group's whole membership: listed volumes
// join, members not listed leave, an empty list empties the group. An unknown group or
// volume is NOT_FOUND; a volume in another group is INVALID_ARGUMENT, the code the proposal
// gives for a volume the plugin cannot add. Parameters, if any, are merged into the group's.
func (g *volumeGroupServer) ModifyVolumeGroupMembership(_ context.Context, req *volumegroup.ModifyVolumeGroupMembershipRequest) (*volumegroup.ModifyVolumeGroupMembershipResponse, error) {
	id := req.GetVolumeGroupId()
	vg, err := g.changeGroup(func(s *state) (*volumeGroup, error) {
		vg := s.Groups[id]
		if vg == nil {
			return nil, notFound("volume group", id)
		}
		if err := join(s, vg, req.GetVolumeIds(), codes.InvalidArgument); err != nil {
			return nil, err
		}
		for _, v := range members(s, id) {
			if !slices.Contains(req.GetVolumeIds(), v.ID) {
				v.GroupID = ""
			}
		}
		if len(req.GetParameters()) > 0 {
			if vg.Parameters == nil {
				vg.Parameters = map[string]string{}
			}
			maps.Copy(vg.Parameters, req.GetParameters())
		}
		return vg, nil
	}, checkRequired("volume_group_id", id),
		checkIDs("volume_ids", req.GetVolumeIds(), false),
		checkParameters("parameters", req.GetParameters(), volumeGroupParameterKeys),
		checkMap("secrets", req.GetSecrets()))
	return respond(&volumegroup.ModifyVolumeGroupMembershipResponse{VolumeGroup: vg}, err)
}

// changeGroup answers CreateVolumeGroup and ModifyVolumeGroupMembership: the first failed
// check (the request's fields, in the RPC's order), else change in one state change (update),
// and the group it returns rendered with its members.
func (g *volumeGroupServer) changeGroup(change func(s *state) (*volumeGroup, error), checks ...error) (*volumegroup.VolumeGroup, error) {
	if err := firstError(checks...); err != nil {
		return nil, err
	}
	var out *volumegroup.VolumeGroup
	err := g.a.update(func(s *state) error {
		vg, err := change(s)
		if err != nil {
			return err
		}
		out = g.a.csiVolumeGroup(s, vg)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// join makes the volumes volIDs members of vg. A missing volume is NOT_FOUND; a volume in
// another group fails with conflict, the code the calling RPC's error table names.
func join(s *state, vg *volumeGroup, volIDs []string, conflict codes.Code) error {
	for _, id := range volIDs {
		v := s.Volumes[id]
		if v == nil {
			return notFound("volume", id)
		}
		if v.GroupID != "" && v.GroupID != vg.ID {
			return status.Errorf(conflict, "volume %s belongs to volume group %s; a volume can be in one group only, so remove it from %s first", id, v.GroupID, v.GroupID)
		}
		v.GroupID = vg.ID
	}
	return nil
}

// DeleteVolumeGroup deletes a group and, as the proposal says, every volume in it. It refuses
// with FAILED_PRECONDITION, changing nothing, while any member is published to a node.
// Snapshots of members are independent copies and do not hold the group back.
func (g *volumeGroupServer) DeleteVolumeGroup(_ context.Context, req *volumegroup.DeleteVolumeGroupRequest) (*volumegroup.DeleteVolumeGroupResponse, error) {
	id := req.GetVolumeGroupId()
	return respond(&volumegroup.DeleteVolumeGroupResponse{}, deleteRecord(g.a, id, groupsOf, func(s *state, _ *volumeGroup) ([]string, error) {
		vols := members(s, id)
		for _, v := range vols {
			if len(v.Publications) > 0 {
				return nil, status.Errorf(codes.FailedPrecondition, "volume group %s is in use: its volume %s is published to node(s) %v; unpublish it before deleting the group, which deletes its volumes", id, v.ID, slices.Sorted(maps.Keys(v.Publications)))
			}
		}
		var deleted []string
		for _, v := range vols {
			delete(s.Volumes, v.ID)
			deleted = append(deleted, v.ID)
		}
		delete(s.Groups, id)
		return deleted, nil
	}, "volume", g.a.images.volumePath, []any{"volume_group_id", id}, checkRequired("volume_group_id", id), checkMap("secrets", req.GetSecrets())))
}

func (g *volumeGroupServer) ControllerGetVolumeGroup(_ context.Context, req *volumegroup.ControllerGetVolumeGroupRequest) (*volumegroup.ControllerGetVolumeGroupResponse, error) {
	id := req.GetVolumeGroupId()
	return getRecord(g.a, "volume group", id, groupsOf, func(s *state, vg *volumeGroup) (*volumegroup.ControllerGetVolumeGroupResponse, error) {
		return &volumegroup.ControllerGetVolumeGroupResponse{VolumeGroup: g.a.csiVolumeGroup(s, vg)}, nil
	}, checkRequired("volume_group_id", id), checkMap("secrets", req.GetSecrets()))
}

func (g *volumeGroupServer) ListVolumeGroups(_ context.Context, req *volumegroup.ListVolumeGroupsRequest) (*volumegroup.ListVolumeGroupsResponse, error) {
	if err := checkMap("secrets", req.GetSecrets()); err != nil {
		return nil, err
	}
	entries, next, err := listPage(g.a, "volumegroups", func(s *state) []*volumeGroup {
		return slices.Collect(maps.Values(s.Groups))
	}, req.GetStartingToken(), req.GetMaxEntries(), func(s *state, vg *volumeGroup) *volumegroup.ListVolumeGroupsResponse_Entry {
		return &volumegroup.ListVolumeGroupsResponse_Entry{VolumeGroup: g.a.csiVolumeGroup(s, vg)}
	})
	if err != nil {
		return nil, err
	}
	return &volumegroup.ListVolumeGroupsResponse{Entries: entries, NextToken: next}, nil
}

// members returns the volumes of group id in creation order.
func members(s *state, id string) []*volume {
	var out []*volume
	for _, v := range s.Volumes {
		if v.GroupID == id {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(x, y *volume) int { return cmp.Compare(x.Seq, y.Seq) })
	return out
}

// csiVolumeGroup renders a group with its member volumes.
func (a *Appliance) csiVolumeGroup(s *state, vg *volumeGroup) *volumegroup.VolumeGroup {
	out := &volumegroup.VolumeGroup{VolumeGroupId: vg.ID}
	for _, v := range members(s, vg.ID) {
		out.Volumes = append(out.Volumes, a.csiVolume(v))
	}
	return out
}
