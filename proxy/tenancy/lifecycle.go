package tenancy

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// create sends a create call and records what it created as the tenant's. A new volume
// first takes its place in the tenant's quota; a create of a name the tenant already holds is
// a retry and needs none.
func (c *call) create(ctx context.Context, req proto.Message) (proto.Message, error) {
	name := req.ProtoReflect().Get(req.ProtoReflect().Descriptor().Fields().ByName("name")).String()
	var requested int64
	if cv, ok := req.(*csi.CreateVolumeRequest); ok {
		requested = requestedBytes(cv.GetCapacityRange())
		if _, exists, err := c.l.ByName(Volume, name); err != nil {
			return nil, ledgerError(err)
		} else if !exists {
			release, err := c.l.reserve(c.tenant, 1, requested)
			if err != nil {
				return nil, err
			}
			defer release()
		}
	}
	resp, err := c.invoke(ctx, c.method, req)
	if err != nil {
		return nil, err
	}
	m := resp.ProtoReflect()
	kind := c.b.creates[0]
	id, ok := ownRef(m, kind)
	if !ok {
		return nil, status.Errorf(codes.Internal, "csi-gateway: the backend's answer to %s names no %s", c.method, kind)
	}
	rec := Record{Name: name}
	if cv, ok := resp.(*csi.CreateVolumeResponse); ok {
		rec.Bytes = cv.GetVolume().GetCapacityBytes()
		if rec.Bytes == 0 {
			rec.Bytes = requested
		}
	}
	if err := c.record(kind, id, rec); err != nil {
		return nil, err
	}
	// What the call created along with it (the snapshots of a group snapshot).
	err = rewriteRefs(m, func(r ref) (string, error) {
		if r.id == "" || r.id == id || !containsKind(c.b.creates[1:], r.kind) {
			return r.id, nil
		}
		if _, known, err := c.l.Lookup(r.kind, r.id); err != nil || known {
			return r.id, err // already recorded: owned by this tenant, or refused below
		}
		return r.id, c.record(r.kind, r.id, Record{})
	})
	if err != nil {
		return nil, err
	}
	return resp, c.scopeResponse(resp)
}

// delete sends a delete call and forgets what it deleted.
func (c *call) delete(ctx context.Context, req proto.Message) (proto.Message, error) {
	id, _ := ownRef(req.ProtoReflect(), c.b.deletes)
	var members []string
	if c.method == deleteVolumeGroup {
		members = c.groupMembers(ctx, req.(*volumegroup.DeleteVolumeGroupRequest))
	}
	resp, err := c.invoke(ctx, c.method, req)
	if err != nil {
		return nil, err
	}
	gone := []ref{{kind: c.b.deletes, id: id}}
	if c.method == deleteVolumeGroupSnapshot {
		// Deleting a group snapshot deletes its snapshots.
		for _, s := range req.(*csi.DeleteVolumeGroupSnapshotRequest).GetSnapshotIds() {
			gone = append(gone, ref{kind: Snapshot, id: s})
		}
	}
	// Deleting a volume group may delete its volumes (the csi-addons proposal says it does);
	// those the backend no longer knows are forgotten.
	for _, v := range members {
		if _, err := c.invoke(ctx, getVolume, &csi.ControllerGetVolumeRequest{VolumeId: v}); status.Code(err) == codes.NotFound {
			gone = append(gone, ref{kind: Volume, id: v})
		}
	}
	for _, r := range gone {
		if err := c.l.Forget(r.kind, r.id); err != nil {
			return nil, ledgerError(err)
		}
	}
	return resp, nil
}

// groupMembers returns the backend IDs of a volume group's volumes, or none when the
// backend cannot tell.
func (c *call) groupMembers(ctx context.Context, req *volumegroup.DeleteVolumeGroupRequest) []string {
	resp, err := c.invoke(ctx, getVolumeGroup, &volumegroup.ControllerGetVolumeGroupRequest{
		VolumeGroupId: req.GetVolumeGroupId(), Secrets: req.GetSecrets(),
	})
	if err != nil {
		return nil
	}
	var ids []string
	for _, v := range resp.(*volumegroup.ControllerGetVolumeGroupResponse).GetVolumeGroup().GetVolumes() {
		ids = append(ids, v.GetVolumeId())
	}
	return ids
}

// expand sends a volume expansion, which first takes the added bytes from the tenant's
// quota, and records the volume's new size.
func (c *call) expand(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (proto.Message, error) {
	rec, _, err := c.l.Lookup(Volume, req.GetVolumeId())
	if err != nil {
		return nil, ledgerError(err)
	}
	requested := requestedBytes(req.GetCapacityRange())
	release, err := c.l.reserve(c.tenant, 0, max(0, requested-rec.Bytes))
	if err != nil {
		return nil, err
	}
	defer release()
	resp, err := c.invoke(ctx, c.method, req)
	if err != nil {
		return nil, err
	}
	size := resp.(*csi.ControllerExpandVolumeResponse).GetCapacityBytes()
	if size == 0 {
		size = requested
	}
	if err := c.record(Volume, req.GetVolumeId(), Record{Bytes: size}); err != nil {
		return nil, err
	}
	return resp, nil
}

// limitCapacity reports no more capacity than the tenant's byte quota has left.
func (c *call) limitCapacity(resp *csi.GetCapacityResponse) {
	left, ok := c.l.bytesLeft(c.tenant)
	if !ok {
		return
	}
	resp.AvailableCapacity = min(resp.GetAvailableCapacity(), left)
	if mv := resp.GetMaximumVolumeSize(); mv != nil {
		mv.Value = min(mv.GetValue(), left)
	}
}

// requestedBytes is the size a capacity range asks for: required_bytes, or limit_bytes
// when only a limit is given.
func requestedBytes(r *csi.CapacityRange) int64 {
	if r.GetRequiredBytes() > 0 {
		return r.GetRequiredBytes()
	}
	return r.GetLimitBytes()
}

func containsKind(kinds []Kind, k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}
