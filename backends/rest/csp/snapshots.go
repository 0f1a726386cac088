package csp

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csi-gateway/csi-gateway/backends"
)

const createSnapshotRPC = "CreateSnapshot"

// createSnapshot snapshots a volume. The name is looked up on the source first (and on every
// volume, where the CSP allows it, because CSI wants ALREADY_EXISTS for a name taken on
// another source), and again after a POST that failed or whose answer was lost.
func (b *Backend) createSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	rpc := createSnapshotRPC
	src, name := req.GetSourceVolumeId(), b.cspName(req.GetName())
	if _, err := b.mustGetVolume(ctx, rpc, src); err != nil {
		return nil, err
	}
	if s, found, err := b.snapshotByName(ctx, rpc, src, name); err != nil {
		return nil, err
	} else if found {
		return b.snapshotResponse(s)
	}
	if err := b.nameTakenElsewhere(ctx, src, name); err != nil {
		return nil, err
	}
	config, description := volumeConfig(req.GetParameters())
	var created snapshot
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPost, path: "/snapshots", body: snapshot{
		Name: name, VolumeID: src, Description: description, Config: config,
	}}, &created)
	if err == nil && a.status == http.StatusOK {
		return b.snapshotResponse(created)
	}
	if s, found, lerr := b.snapshotByName(ctx, rpc, src, name); lerr == nil && found {
		return b.snapshotResponse(s)
	}
	if err != nil {
		return nil, err
	}
	if a.status == http.StatusConflict {
		return nil, b.errorf(backends.ClassAlreadyExists, rpc, "a snapshot named %q exists, not of volume %q", name, src)
	}
	return nil, b.createFailed(rpc, a)
}

// nameTakenElsewhere is ALREADY_EXISTS when a snapshot of another volume has the name. The
// CSP's contract lets GET /snapshots?name= omit the volume; a CSP that refuses that (400)
// leaves the check to its own 409 on the POST.
func (b *Backend) nameTakenElsewhere(ctx context.Context, src, name string) error {
	if !b.profile.listAllSnapshots {
		return nil
	}
	var list []snapshot
	if found, err := b.get(ctx, createSnapshotRPC, "/snapshots", url.Values{"name": {name}}, &list); err != nil || !found {
		return nil
	}
	for _, s := range list {
		if s.Name == name && s.VolumeID != src {
			return b.errorf(backends.ClassAlreadyExists, createSnapshotRPC, "a snapshot named %q exists, of another volume", name)
		}
	}
	return nil
}

func (b *Backend) snapshotResponse(s snapshot) (*csi.CreateSnapshotResponse, error) {
	snap, err := b.csiSnapshot(createSnapshotRPC, s)
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: snap}, nil
}

// csiSnapshot is a CSP snapshot as CSI describes it; ready unless the CSP says otherwise.
func (b *Backend) csiSnapshot(rpc string, s snapshot) (*csi.Snapshot, error) {
	if s.ID == "" || len(s.ID) > 128 {
		return nil, b.errorf(backends.ClassInternal, rpc, "the CSP's snapshot ID %.40q is empty or longer than CSI's 128 bytes", s.ID)
	}
	ready := s.ReadyToUse == nil || *s.ReadyToUse
	snap := &csi.Snapshot{SnapshotId: s.ID, SourceVolumeId: s.VolumeID, SizeBytes: int64(s.Size), ReadyToUse: ready}
	if s.CreationTime > 0 {
		snap.CreationTime = timestamppb.New(unixTime(int64(s.CreationTime)))
	} else {
		snap.CreationTime = timestamppb.Now()
	}
	return snap, nil
}

// deleteSnapshot deletes a snapshot; an absent one is OK, one with clones FAILED_PRECONDITION.
// Where a CSP may answer 204 without deleting (truenas-csp, for a snapshot with clones), the
// snapshot is looked up again: still there is FAILED_PRECONDITION, never a wrong OK.
func (b *Backend) deleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	rpc := "DeleteSnapshot"
	id := req.GetSnapshotId()
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodDelete, path: "/snapshots/" + url.PathEscape(id), idempotent: true}, nil)
	switch {
	case err != nil:
		return nil, err
	case a.notFound(b.profile):
		return &csi.DeleteSnapshotResponse{}, nil
	case a.status/100 != 2:
		return nil, b.classify(rpc, a)
	}
	if b.profile.verifySnapshotDelete {
		if _, found, err := b.getSnapshot(ctx, rpc, id); err != nil {
			return nil, err
		} else if found {
			return nil, b.errorf(backends.ClassPrecondition, rpc, "the CSP answered %d to deleting snapshot %q, but it still exists (volumes cloned from it keep it)", a.status, id)
		}
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// listSnapshots lists by snapshot ID, by source volume, or everything (GET /snapshots, or
// one list per volume where the CSP wants a volume_id), and pages in the gateway. The hidden
// sources of volume clones are not listed: the orchestrator did not make them.
func (b *Backend) listSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	rpc := "ListSnapshots"
	var all []snapshot
	switch {
	case req.GetSnapshotId() != "":
		s, found, err := b.getSnapshot(ctx, rpc, req.GetSnapshotId())
		if err != nil {
			return nil, err
		}
		if found && (req.GetSourceVolumeId() == "" || s.VolumeID == req.GetSourceVolumeId()) {
			all = append(all, s)
		}
	case req.GetSourceVolumeId() != "":
		if _, err := b.get(ctx, rpc, "/snapshots", url.Values{"volume_id": {req.GetSourceVolumeId()}}, &all); err != nil {
			return nil, err
		}
	default:
		var err error
		if all, err = b.allSnapshots(ctx, rpc); err != nil {
			return nil, err
		}
	}
	visible := all[:0]
	for _, s := range all {
		if !s.hidden() {
			visible = append(visible, s)
		}
	}
	return listPage(b, rpc, visible, func(s snapshot) string { return s.ID }, req, func(s snapshot) (*csi.ListSnapshotsResponse_Entry, error) {
		snap, err := b.csiSnapshot(rpc, s)
		return &csi.ListSnapshotsResponse_Entry{Snapshot: snap}, err
	}, func(entries []*csi.ListSnapshotsResponse_Entry, next string) *csi.ListSnapshotsResponse {
		return &csi.ListSnapshotsResponse{Entries: entries, NextToken: next}
	})
}

// getSnapshotInfo answers GetSnapshot with the snapshot as ListSnapshots shows it: NOT_FOUND
// when the CSP does not have it, and for the hidden source of a volume clone, which
// ListSnapshots does not show either.
func (b *Backend) getSnapshotInfo(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	rpc := "GetSnapshot"
	s, err := mustFind(ctx, b, rpc, "snapshot", req.GetSnapshotId(), b.getSnapshot)
	if err != nil {
		return nil, err
	}
	if s.hidden() {
		return nil, b.notFoundError(rpc, "snapshot", req.GetSnapshotId())
	}
	snap, err := b.csiSnapshot(rpc, s)
	if err != nil {
		return nil, err
	}
	return &csi.GetSnapshotResponse{Snapshot: snap}, nil
}

// hidden reports the source of a volume clone (cloneSourceSnapshot): the orchestrator did
// not make it, and neither lists nor reads it.
func (s snapshot) hidden() bool { return strings.HasPrefix(s.Name, hiddenCloneSnapshotLabel) }

// allSnapshots lists every snapshot: GET /snapshots, or, where the CSP requires a volume_id
// (400), GET /volumes and one list per volume.
func (b *Backend) allSnapshots(ctx context.Context, rpc string) ([]snapshot, error) {
	if !b.profile.listAllSnapshots {
		return nil, b.errorf(backends.ClassUnimplemented, rpc, "a %s CSP cannot list every snapshot; filter by snapshot_id or source_volume_id", b.profile.name)
	}
	var all []snapshot
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodGet, path: "/snapshots", idempotent: true}, &all)
	switch {
	case err != nil:
		return nil, err
	case a.status == http.StatusOK:
		return all, nil
	case a.status != http.StatusBadRequest:
		return nil, b.classify(rpc, a)
	}
	var vols []volume
	if _, err := b.get(ctx, rpc, "/volumes", nil, &vols); err != nil {
		return nil, err
	}
	for _, v := range vols {
		var list []snapshot
		if _, err := b.get(ctx, rpc, "/snapshots", url.Values{"volume_id": {v.ID}}, &list); err != nil {
			return nil, err
		}
		all = append(all, list...)
	}
	return all, nil
}
