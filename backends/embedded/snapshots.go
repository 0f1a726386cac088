package embedded

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Snapshot parameters the appliance understands (recorded, reported nowhere else).
var snapshotParameterKeys = []string{"retention"}

func (c *controllerServer) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	a := c.a
	err := firstError(
		checkName("name", req.GetName()),
		checkRequired("source_volume_id", req.GetSourceVolumeId()),
		checkParameters("parameters", req.GetParameters(), snapshotParameterKeys),
		checkMap("secrets", req.GetSecrets()),
		// Every snapshot is usable from the appliance's one zone only, an existing one too: a
		// requisite without that zone is refused, repeated call or not.
		a.checkAccessibility(req.GetAccessibilityRequirements()))
	if err != nil {
		return nil, err
	}
	out, err := createWithImages(a, func(s *state, images *[]string) (*snapshot, error) {
		if sn := byName(s.Snapshots, req.GetName()); sn != nil {
			if sn.SourceVolumeID != req.GetSourceVolumeId() {
				return nil, status.Errorf(codes.AlreadyExists, "snapshot %q already exists as %s of volume %s, not of %s; use another name", sn.Name, sn.ID, sn.SourceVolumeID, req.GetSourceVolumeId())
			}
			return sn, nil
		}
		sn, err := a.cutSnapshot(s, req.GetName(), req.GetSourceVolumeId(), "", images)
		if err != nil {
			return nil, err
		}
		sn.Parameters = req.GetParameters()
		return sn, nil
	})
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: a.csiSnapshot(out)}, nil
}

// cutSnapshot copies the image of volume volID into a new snapshot named name, adds it to s
// and returns it, the path of its image added to images as soon as the image exists (so the
// caller can remove it if the state is not written).
func (a *Appliance) cutSnapshot(s *state, name, volID, groupSnapshotID string, images *[]string) (*snapshot, error) {
	v := s.Volumes[volID]
	if v == nil {
		return nil, notFound("source volume", volID)
	}
	sn := &snapshot{
		named:           s.newNamed("snap-", name),
		SourceVolumeID:  volID,
		SizeBytes:       v.CapacityBytes,
		GroupSnapshotID: groupSnapshotID,
		CreatedAt:       time.Now().UTC(),
	}
	path := a.images.snapshotPath(sn.ID)
	if err := a.images.create(path, a.images.volumePath(volID), v.CapacityBytes); err != nil {
		return nil, status.Errorf(codes.Internal, "copy volume %s into snapshot %q: %v", volID, name, err)
	}
	*images = append(*images, path)
	s.Snapshots[sn.ID] = sn
	return sn, nil
}

// csiSnapshot renders a snapshot record for a response. A snapshot is usable where its
// volumes can be created: the appliance's one zone (SNAPSHOT_ACCESSIBILITY_CONSTRAINTS).
func (a *Appliance) csiSnapshot(sn *snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:         sn.ID,
		SourceVolumeId:     sn.SourceVolumeID,
		SizeBytes:          sn.SizeBytes,
		CreationTime:       timestamppb.New(sn.CreatedAt),
		ReadyToUse:         true, // the copy is complete before the call returns
		GroupSnapshotId:    sn.GroupSnapshotID,
		AccessibleTopology: []*csi.Topology{a.topology()},
	}
}

func (c *controllerServer) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	return respond(&csi.DeleteSnapshotResponse{}, deleteOne(c.a, "snapshot", "snapshot_id", id, snapshotsOf, c.a.images.snapshotPath, func(sn *snapshot) error {
		if sn.GroupSnapshotID != "" {
			return status.Errorf(codes.InvalidArgument, "snapshot %s is part of group snapshot %s; delete the group snapshot instead", id, sn.GroupSnapshotID)
		}
		return nil
	}))
}

func (c *controllerServer) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	entries, next, err := listPage(c.a, "snapshots", func(s *state) []*snapshot {
		return slices.DeleteFunc(slices.Collect(maps.Values(s.Snapshots)), func(sn *snapshot) bool {
			return (req.GetSnapshotId() != "" && sn.ID != req.GetSnapshotId()) ||
				(req.GetSourceVolumeId() != "" && sn.SourceVolumeID != req.GetSourceVolumeId())
		})
	}, req.GetStartingToken(), req.GetMaxEntries(), func(_ *state, sn *snapshot) *csi.ListSnapshotsResponse_Entry {
		return &csi.ListSnapshotsResponse_Entry{Snapshot: c.a.csiSnapshot(sn)}
	})
	if err != nil {
		return nil, err
	}
	return &csi.ListSnapshotsResponse{Entries: entries, NextToken: next}, nil
}

func (c *controllerServer) GetSnapshot(_ context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	id := req.GetSnapshotId()
	return getRecord(c.a, "snapshot", id, snapshotsOf, func(_ *state, sn *snapshot) (*csi.GetSnapshotResponse, error) {
		return &csi.GetSnapshotResponse{Snapshot: c.a.csiSnapshot(sn)}, nil
	}, checkRequired("snapshot_id", id))
}
