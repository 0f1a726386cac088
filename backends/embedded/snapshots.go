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
	if err := checkName("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkRequired("source_volume_id", req.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	if err := checkParameters("parameters", req.GetParameters(), snapshotParameterKeys); err != nil {
		return nil, err
	}
	if err := checkMap("secrets", req.GetSecrets()); err != nil {
		return nil, err
	}
	// Every snapshot is usable from the appliance's one zone only, an existing one too: a
	// requisite without that zone is refused, repeated call or not.
	if err := a.checkAccessibility(req.GetAccessibilityRequirements()); err != nil {
		return nil, err
	}
	var out *snapshot
	var createdImage string
	err := a.update(func(s *state) error {
		if sn := s.snapshotByName(req.GetName()); sn != nil {
			if sn.SourceVolumeID != req.GetSourceVolumeId() {
				return status.Errorf(codes.AlreadyExists, "snapshot %q already exists as %s of volume %s, not of %s; use another name", sn.Name, sn.ID, sn.SourceVolumeID, req.GetSourceVolumeId())
			}
			out = sn
			return nil
		}
		sn, path, err := a.cutSnapshot(s, req.GetName(), req.GetSourceVolumeId(), "")
		createdImage = path
		if err != nil {
			return err
		}
		sn.Parameters = req.GetParameters()
		out = sn
		return nil
	})
	if err != nil {
		if createdImage != "" {
			a.images.remove(createdImage)
		}
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: a.csiSnapshot(out)}, nil
}

// cutSnapshot copies the image of volume volID into a new snapshot named name, adds it to s
// and returns it with the path of its image (set as soon as the image exists, so the caller
// can remove it if the state is not written).
func (a *Appliance) cutSnapshot(s *state, name, volID, groupSnapshotID string) (*snapshot, string, error) {
	v := s.Volumes[volID]
	if v == nil {
		return nil, "", notFound("source volume", volID)
	}
	sn := &snapshot{
		ID:              newID("snap-"),
		Name:            name,
		Seq:             s.nextSeq(),
		SourceVolumeID:  volID,
		SizeBytes:       v.CapacityBytes,
		GroupSnapshotID: groupSnapshotID,
		CreatedAt:       time.Now().UTC(),
	}
	path := a.images.snapshotPath(sn.ID)
	if err := a.images.create(path, a.images.volumePath(volID), v.CapacityBytes); err != nil {
		return nil, "", status.Errorf(codes.Internal, "copy volume %s into snapshot %q: %v", volID, name, err)
	}
	s.Snapshots[sn.ID] = sn
	return sn, path, nil
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
	a := c.a
	id := req.GetSnapshotId()
	if err := checkRequired("snapshot_id", id); err != nil {
		return nil, err
	}
	var deleted []string
	err := a.update(func(s *state) error {
		sn := s.Snapshots[id]
		if sn == nil {
			return nil // already gone: OK
		}
		if sn.GroupSnapshotID != "" {
			return status.Errorf(codes.InvalidArgument, "snapshot %s is part of group snapshot %s; delete the group snapshot instead", id, sn.GroupSnapshotID)
		}
		delete(s.Snapshots, id)
		deleted = []string{id}
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.removeDeletedImages("snapshot", a.images.snapshotPath, deleted)
	return &csi.DeleteSnapshotResponse{}, nil
}

func (c *controllerServer) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	var out *csi.ListSnapshotsResponse
	err := c.a.view(func(s *state) error {
		all := slices.Collect(maps.Values(s.Snapshots))
		all = slices.DeleteFunc(all, func(sn *snapshot) bool {
			return (req.GetSnapshotId() != "" && sn.ID != req.GetSnapshotId()) ||
				(req.GetSourceVolumeId() != "" && sn.SourceVolumeID != req.GetSourceVolumeId())
		})
		snaps, next, err := page("snapshots", all, func(sn *snapshot) int64 { return sn.Seq }, req.GetStartingToken(), req.GetMaxEntries())
		if err != nil {
			return err
		}
		out = &csi.ListSnapshotsResponse{NextToken: next}
		for _, sn := range snaps {
			out.Entries = append(out.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: c.a.csiSnapshot(sn)})
		}
		return nil
	})
	return out, err
}

func (c *controllerServer) GetSnapshot(_ context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if err := checkRequired("snapshot_id", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	var out *csi.GetSnapshotResponse
	err := c.a.view(func(s *state) error {
		sn := s.Snapshots[req.GetSnapshotId()]
		if sn == nil {
			return notFound("snapshot", req.GetSnapshotId())
		}
		out = &csi.GetSnapshotResponse{Snapshot: c.a.csiSnapshot(sn)}
		return nil
	})
	return out, err
}
