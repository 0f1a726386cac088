package tenancy

import (
	"context"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// create sends a create call (req, scoped; given is the name the tenant gave) and records
// what it created as the tenant's. A volume first takes its place in the tenant's quota —
// also when the ledger records a volume under its name: the create is then a retry, which
// answers that volume (its record turns the hold back into nothing new), or the backend lost
// that volume (a delete that reached it and was not forgotten) and makes a new one, which the
// hold counts until it is recorded in the lost one's place (reserve leaves the recorded
// volume's room to the create, so a retry is never refused for the room its own volume takes).
func (c *call) create(ctx context.Context, req proto.Message, given string) (proto.Message, error) {
	name := nameOf(req)
	var requested int64
	var res *reservation
	if cv, ok := req.(*csi.CreateVolumeRequest); ok {
		requested = requestedBytes(cv.GetCapacityRange())
		var err error
		if res, err = c.reserveCreate(ctx, cv); err != nil {
			return nil, err
		}
		defer res.release()
	}
	resp, err := c.invoke(ctx, c.method, req)
	if err != nil {
		if outcomeUnknown(err) {
			res.keep()
		}
		return nil, err
	}
	m := resp.ProtoReflect()
	kind := c.b.creates[0]
	id, ok := ownRef(m, kind)
	if !ok {
		return nil, status.Errorf(codes.Internal, "csi-gateway: the backend's answer to %s names no %s", c.method, kind)
	}
	rec := Record{Name: name, Asked: asked(c.tenant, given, name)}
	if cv, ok := resp.(*csi.CreateVolumeResponse); ok {
		rec.Bytes = cv.GetVolume().GetCapacityBytes()
		if rec.Bytes == 0 {
			rec.Bytes = requested
		}
	}
	if err := c.record(ctx, kind, id, rec, res); err != nil {
		res.keep() // the volume exists: its hold counts it until a retry records it
		return nil, err
	}
	// What the call created along with it (the snapshots of a group snapshot).
	err = rewriteRefs(m, func(r ref) (string, error) {
		if r.id == "" || r.id == id || !containsKind(c.b.creates[1:], r.kind) {
			return r.id, nil
		}
		if _, known, err := c.l.Lookup(ctx, r.kind, r.id); err != nil {
			return r.id, ledgerError(err)
		} else if known {
			return r.id, nil // already recorded: owned by this tenant, or refused below
		}
		return r.id, c.record(ctx, r.kind, r.id, Record{}, nil)
	})
	if err != nil {
		return nil, err
	}
	return resp, c.scopeResponse(resp)
}

// nameOf is the name field of a create's request.
func nameOf(req proto.Message) string {
	m := req.ProtoReflect()
	return m.Get(m.Descriptor().Fields().ByName("name")).String()
}

// outcomeUnknown reports whether a failed create may have created its object: the backend
// call ended without an answer (its deadline, a broken connection) or with one that does not
// say it did nothing.
func outcomeUnknown(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Unknown, codes.Internal:
		return true
	}
	return false
}

// delete sends a delete call and forgets what it deleted.
func (c *call) delete(ctx context.Context, req proto.Message) (proto.Message, error) {
	id, _ := ownRef(req.ProtoReflect(), c.b.deletes)
	var members, snapshots []string
	switch c.method {
	case deleteVolumeGroup:
		members = c.groupMembers(ctx, req.(*volumegroup.DeleteVolumeGroupRequest))
	case deleteVolumeGroupSnapshot:
		// Deleting a group snapshot deletes its snapshots, listed in the request or not.
		snapshots = c.groupSnapshotMembers(ctx, req.(*csi.DeleteVolumeGroupSnapshotRequest))
	}
	resp, err := c.invoke(ctx, c.method, req)
	if err != nil {
		return nil, err
	}
	gone := []ref{{kind: c.b.deletes, id: id}}
	for _, s := range snapshots {
		gone = append(gone, ref{kind: Snapshot, id: s})
	}
	// Deleting a volume group may delete its volumes (the csi-addons proposal says it does);
	// those the backend no longer knows are forgotten.
	for _, v := range members {
		if _, err := c.invoke(ctx, getVolume, &csi.ControllerGetVolumeRequest{VolumeId: v}); status.Code(err) == codes.NotFound {
			gone = append(gone, ref{kind: Volume, id: v})
		}
	}
	for _, r := range gone {
		if err := c.l.Forget(ctx, r.kind, r.id); err != nil {
			return nil, ledgerError(err)
		}
	}
	return resp, nil
}

// groupSnapshotMembers returns the backend IDs of a group snapshot's snapshots: those the
// request lists, and those the backend says it has.
func (c *call) groupSnapshotMembers(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) []string {
	ids := slices.Clone(req.GetSnapshotIds())
	resp, err := c.invoke(ctx, getVolumeGroupSnapshot, &csi.GetVolumeGroupSnapshotRequest{
		GroupSnapshotId: req.GetGroupSnapshotId(), SnapshotIds: req.GetSnapshotIds(), Secrets: req.GetSecrets(),
	})
	if err != nil {
		return ids
	}
	for _, s := range resp.(*csi.GetVolumeGroupSnapshotResponse).GetGroupSnapshot().GetSnapshots() {
		if !slices.Contains(ids, s.GetSnapshotId()) {
			ids = append(ids, s.GetSnapshotId())
		}
	}
	return ids
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
// quota (and is told not to grow past what the quota has left), and records the volume's
// new size.
func (c *call) expand(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (proto.Message, error) {
	rec, _, err := c.l.Lookup(ctx, Volume, req.GetVolumeId())
	if err != nil {
		return nil, ledgerError(err)
	}
	requested := requestedBytes(req.GetCapacityRange())
	left, limited, err := c.l.bytesLeft(ctx, c.tenant)
	if err != nil {
		return nil, err
	}
	if limited && req.GetCapacityRange() != nil {
		capLimit(req.GetCapacityRange(), rec.Bytes+left)
	}
	res, err := c.l.reserve(ctx, c.tenant, 0, max(0, requested-rec.Bytes), "")
	if err != nil {
		return nil, err
	}
	defer res.release()
	resp, err := c.invoke(ctx, c.method, req)
	if err != nil {
		return nil, err
	}
	size := resp.(*csi.ControllerExpandVolumeResponse).GetCapacityBytes()
	if size == 0 {
		size = requested
	}
	if err := c.record(ctx, Volume, req.GetVolumeId(), Record{Bytes: size}, res); err != nil {
		return nil, err
	}
	return resp, nil
}

// reserveCreate holds a new volume's place in the tenant's quota. With a byte quota the
// backend is told not to allocate more than the quota has left (limit_bytes), so that a
// create without a size, or a backend that rounds sizes up, cannot exceed it; a create that
// names no size holds all that is left until it is answered.
func (c *call) reserveCreate(ctx context.Context, req *csi.CreateVolumeRequest) (*reservation, error) {
	bytes := requestedBytes(req.GetCapacityRange())
	left, limited, err := c.l.bytesLeft(ctx, c.tenant)
	if err != nil {
		return nil, err
	}
	if limited {
		// The room of the volume recorded under the name, and of the hold an earlier create
		// of it left, is the create's too (reserve); read after the usage, so that what
		// goes between the two reads is not counted as room twice.
		recorded, err := c.l.recordedUnder(ctx, c.tenant, req.GetName())
		if err != nil {
			return nil, ledgerError(err)
		}
		held, err := c.l.store.createHeld(ctx, c.tenant, req.GetName())
		if err != nil {
			return nil, ledgerError(err)
		}
		left += recorded.bytes + held.bytes
		if left <= 0 {
			return nil, status.Errorf(codes.ResourceExhausted, "csi-gateway: tenant %s has used all of its maxBytes quota: delete or shrink a volume first", c.tenant)
		}
		if req.CapacityRange == nil {
			req.CapacityRange = &csi.CapacityRange{}
		}
		capLimit(req.CapacityRange, left)
		if req.GetCapacityRange().GetRequiredBytes() == 0 {
			bytes = req.GetCapacityRange().GetLimitBytes()
		}
	}
	return c.l.reserve(ctx, c.tenant, 1, bytes, req.GetName())
}

// capLimit lowers a capacity range's limit_bytes to at most most (0 is no limit in CSI).
func capLimit(r *csi.CapacityRange, most int64) {
	if r.LimitBytes == 0 || r.LimitBytes > most {
		r.LimitBytes = most
	}
}

// limitCapacity reports no more capacity than the tenant's byte quota has left.
func (c *call) limitCapacity(ctx context.Context, resp *csi.GetCapacityResponse) error {
	left, limited, err := c.l.bytesLeft(ctx, c.tenant)
	if err != nil || !limited {
		return err
	}
	resp.AvailableCapacity = min(resp.GetAvailableCapacity(), left)
	if mv := resp.GetMaximumVolumeSize(); mv != nil {
		mv.Value = min(mv.GetValue(), left)
	}
	return nil
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
