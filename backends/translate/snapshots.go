package translate

import (
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// Snapshots (v0.3): v1's snapshot_id, creation_time (a Timestamp) and ready_to_use are v0's
// id, created_at (Unix nanoseconds) and status (READY, UPLOADING, ERROR_UPLOADING, with
// details); secrets are create_snapshot_secrets / delete_snapshot_secrets.

// snapshotToV1: READY is ready_to_use; UPLOADING and UNKNOWN are not ready yet.
func snapshotToV1(s *csiv0.Snapshot) *csi.Snapshot {
	if s == nil {
		return nil
	}
	out := crossed[*csi.Snapshot](s)
	out.ReadyToUse = s.GetStatus().GetType() == csiv0.SnapshotStatus_READY
	if ns := s.GetCreatedAt(); ns != 0 {
		out.CreationTime = timestamppb.New(time.Unix(0, ns))
	}
	return out
}

// snapshotToV0: a snapshot not ready to use is UPLOADING (v1 has no failed state); its
// group does not cross.
func snapshotToV0(s *csi.Snapshot) *csiv0.Snapshot {
	if s == nil {
		return nil
	}
	out := crossed[*csiv0.Snapshot](s)
	out.Status = &csiv0.SnapshotStatus{Type: csiv0.SnapshotStatus_UPLOADING}
	if s.GetReadyToUse() {
		out.Status.Type = csiv0.SnapshotStatus_READY
	}
	if t := s.GetCreationTime(); t != nil {
		out.CreatedAt = t.AsTime().UnixNano()
	}
	return out
}

// createdSnapshotToV1 fails the call when the driver reports the snapshot's upload failed
// (ERROR_UPLOADING): v1 has no such state, and a snapshot never ready would be waited on
// forever.
func createdSnapshotToV1(r *csiv0.CreateSnapshotResponse, _ *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if st := r.GetSnapshot().GetStatus(); st.GetType() == csiv0.SnapshotStatus_ERROR_UPLOADING {
		return nil, &crossError{class: backends.ClassInternal,
			msg: "the driver reports the snapshot failed (ERROR_UPLOADING): " + st.GetDetails()}
	}
	return &csi.CreateSnapshotResponse{Snapshot: snapshotToV1(r.GetSnapshot())}, nil
}

func createdSnapshotToV0(r *csi.CreateSnapshotResponse) *csiv0.CreateSnapshotResponse {
	return &csiv0.CreateSnapshotResponse{Snapshot: snapshotToV0(r.GetSnapshot())}
}
