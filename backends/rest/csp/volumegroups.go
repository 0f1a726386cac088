package csp

import (
	"context"
	"net/http"
	"net/url"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"

	"github.com/csi-gateway/csi-gateway/backends"
)

// The csi-addons VolumeGroup controller on CSP volume groups. Membership is the volume's
// volume_group_id, set with PUT /volumes/{id}.

func (b *Backend) createVolumeGroup(ctx context.Context, req *volumegroup.CreateVolumeGroupRequest) (*volumegroup.CreateVolumeGroupResponse, error) {
	rpc := "CreateVolumeGroup"
	if err := b.requireGroups(rpc); err != nil {
		return nil, err
	}
	name := b.cspName(req.GetName())
	var found []volumeGroup
	if _, err := b.get(ctx, rpc, "/volume_groups", url.Values{"name": {name}}, &found); err != nil {
		return nil, err
	}
	var g volumeGroup
	for _, f := range found {
		if f.Name == name {
			g = f
		}
	}
	if g.ID == "" {
		config, description := volumeConfig(req.GetParameters())
		a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPost, path: "/volume_groups",
			body: volumeGroup{Name: name, Description: description, Config: config}}, &g)
		if err != nil {
			return nil, err
		}
		if a.status != http.StatusOK {
			return nil, b.classify(rpc, a)
		}
	}
	vg, err := b.withMembers(ctx, rpc, g, req.GetVolumeIds())
	if err != nil {
		return nil, err
	}
	return &volumegroup.CreateVolumeGroupResponse{VolumeGroup: vg}, nil
}

// withMembers makes ids the members of g and renders the group as it then is.
func (b *Backend) withMembers(ctx context.Context, rpc string, g volumeGroup, ids []string) (*volumegroup.VolumeGroup, error) {
	if err := b.setMembers(ctx, rpc, g, ids); err != nil {
		return nil, err
	}
	return b.csiVolumeGroup(ctx, rpc, g.ID)
}

func (b *Backend) modifyVolumeGroupMembership(ctx context.Context, req *volumegroup.ModifyVolumeGroupMembershipRequest) (*volumegroup.ModifyVolumeGroupMembershipResponse, error) {
	rpc := "ModifyVolumeGroupMembership"
	if err := b.requireGroups(rpc); err != nil {
		return nil, err
	}
	g, err := mustFind(ctx, b, rpc, "volume group", req.GetVolumeGroupId(), b.getVolumeGroup)
	if err != nil {
		return nil, err
	}
	vg, err := b.withMembers(ctx, rpc, g, req.GetVolumeIds())
	if err != nil {
		return nil, err
	}
	return &volumegroup.ModifyVolumeGroupMembershipResponse{VolumeGroup: vg}, nil
}

// setMembers makes want the group's volumes: each added volume gets the group's ID, each
// removed one none.
func (b *Backend) setMembers(ctx context.Context, rpc string, g volumeGroup, want []string) error {
	var have []string
	for _, v := range g.Volumes {
		have = append(have, v.ID)
	}
	for _, id := range want {
		if !slices.Contains(have, id) {
			if err := b.setVolumeGroup(ctx, rpc, id, g.ID); err != nil {
				return err
			}
		}
	}
	for _, id := range have {
		if !slices.Contains(want, id) {
			if err := b.setVolumeGroup(ctx, rpc, id, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend) setVolumeGroup(ctx context.Context, rpc, volumeID, groupID string) error {
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPut, path: "/volumes/" + url.PathEscape(volumeID), idempotent: true,
		body: map[string]string{"volume_group_id": groupID}}, nil)
	switch {
	case err != nil:
		return err
	case a.status/100 == 2:
		return nil
	case a.notFound(b.profile):
		return b.notFoundError(rpc, "volume", volumeID)
	}
	return b.classify(rpc, a)
}

// deleteVolumeGroup deletes an empty group; a CSP refuses a group with volumes (409:
// FAILED_PRECONDITION), so the gateway never deletes volumes as a side effect.
func (b *Backend) deleteVolumeGroup(ctx context.Context, req *volumegroup.DeleteVolumeGroupRequest) (*volumegroup.DeleteVolumeGroupResponse, error) {
	rpc := "DeleteVolumeGroup"
	if err := b.requireGroups(rpc); err != nil {
		return nil, err
	}
	if err := b.remove(ctx, rpc, "/volume_groups/"+url.PathEscape(req.GetVolumeGroupId())); err != nil {
		return nil, err
	}
	return &volumegroup.DeleteVolumeGroupResponse{}, nil
}

func (b *Backend) listVolumeGroups(ctx context.Context, req *volumegroup.ListVolumeGroupsRequest) (*volumegroup.ListVolumeGroupsResponse, error) {
	rpc := "ListVolumeGroups"
	if err := b.requireGroups(rpc); err != nil {
		return nil, err
	}
	var all []volumeGroup
	if _, err := b.get(ctx, rpc, "/volume_groups", nil, &all); err != nil {
		return nil, err
	}
	return listPage(b, rpc, all, func(g volumeGroup) string { return g.ID }, req, func(g volumeGroup) (*volumegroup.ListVolumeGroupsResponse_Entry, error) {
		return &volumegroup.ListVolumeGroupsResponse_Entry{VolumeGroup: groupOf(g)}, nil
	}, func(entries []*volumegroup.ListVolumeGroupsResponse_Entry, next string) *volumegroup.ListVolumeGroupsResponse {
		return &volumegroup.ListVolumeGroupsResponse{Entries: entries, NextToken: next}
	})
}

func (b *Backend) controllerGetVolumeGroup(ctx context.Context, req *volumegroup.ControllerGetVolumeGroupRequest) (*volumegroup.ControllerGetVolumeGroupResponse, error) {
	rpc := "ControllerGetVolumeGroup"
	if err := b.requireGroups(rpc); err != nil {
		return nil, err
	}
	vg, err := b.csiVolumeGroup(ctx, rpc, req.GetVolumeGroupId())
	if err != nil {
		return nil, err
	}
	return &volumegroup.ControllerGetVolumeGroupResponse{VolumeGroup: vg}, nil
}

// csiVolumeGroup reads a group as csi-addons describes it: NOT_FOUND when it does not exist.
func (b *Backend) csiVolumeGroup(ctx context.Context, rpc, id string) (*volumegroup.VolumeGroup, error) {
	g, err := mustFind(ctx, b, rpc, "volume group", id, b.getVolumeGroup)
	if err != nil {
		return nil, err
	}
	return groupOf(g), nil
}

func groupOf(g volumeGroup) *volumegroup.VolumeGroup {
	vg := &volumegroup.VolumeGroup{VolumeGroupId: g.ID}
	for _, v := range g.Volumes {
		vg.Volumes = append(vg.Volumes, &csi.Volume{VolumeId: v.ID})
	}
	return vg
}

func (b *Backend) requireGroups(rpc string) error {
	if !b.profile.groups {
		return b.errorf(backends.ClassUnimplemented, rpc, "a %s CSP has no volume groups", b.profile.name)
	}
	return nil
}
