package csp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/backends"
)

const createVolumeRPC = "CreateVolume"

// createVolume creates an empty volume, a volume from a snapshot (a CSP clone of it), or a
// clone of a volume (through a snapshot whose name is derived from the new volume's, since a
// CSP clones only snapshots). The name is looked up first, and again after a POST that
// failed or whose answer was lost: a retried create returns the one volume.
func (b *Backend) createVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	rpc := createVolumeRPC
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, b.errorf(backends.ClassInvalid, rpc, "%v", err)
	}
	if err := b.checkMutable(rpc, req.GetMutableParameters()); err != nil {
		return nil, err
	}
	size, err := b.sizeFor(rpc, req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	src, err := b.resolveSource(ctx, req)
	if err != nil {
		return nil, err
	}
	if src.snapshotSize > 0 {
		if req.GetCapacityRange().GetRequiredBytes() == 0 {
			size = src.snapshotSize // as large as the source, unless asked for more
		}
		if size < src.snapshotSize || !fits(size, req.GetCapacityRange()) {
			return nil, b.errorf(backends.ClassOutOfRange, rpc, "the source is %d bytes; capacity_range [%d, %d] cannot hold it",
				src.snapshotSize, req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes())
		}
	}
	name := b.cspName(req.GetName())
	if v, found, err := b.volumeByName(ctx, rpc, name); err != nil {
		return nil, err
	} else if found {
		return b.existingVolume(ctx, req, v, src)
	}
	if src.volumeID != "" {
		if src.snapshotID, err = b.cloneSourceSnapshot(ctx, src.volumeID, req.GetName()); err != nil {
			return nil, err
		}
	}
	config, description := volumeConfig(req.GetParameters())
	for k, v := range req.GetMutableParameters() {
		if config == nil {
			config = map[string]any{}
		}
		config[k] = v
	}
	if config == nil {
		config = map[string]any{} // truenas-csp fails a create without a config object
	}
	var created volume
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPost, path: "/volumes", body: newVolume{
		Name: name, Size: number(size), Description: description, Config: config,
		BaseSnapshotID: src.snapshotID, Clone: src.snapshotID != "",
	}}, &created)
	if err == nil && a.status == http.StatusOK {
		return b.volumeResponse(created, req.GetVolumeContentSource())
	}
	// The POST failed, or its answer was lost: the volume may exist all the same.
	if v, found, lerr := b.volumeByName(ctx, rpc, name); lerr == nil && found {
		return b.existingVolume(ctx, req, v, src)
	}
	if err != nil {
		return nil, err
	}
	if a.status == http.StatusConflict {
		return nil, b.errorf(backends.ClassUnavailable, rpc, "the CSP says a volume named %q exists (409) but does not find it by name; retry", req.GetName())
	}
	return nil, b.createFailed(rpc, a)
}

// createFailed classifies a failed create that a lookup did not find. A server error does
// not say the object was not made (truenas-csp answers 404 to lookups while its array times
// out, then 500 to the create of a name that exists): UNAVAILABLE, so that the orchestrator
// retries under the same name rather than giving up on an object that may exist.
func (b *Backend) createFailed(rpc string, a answer) error {
	err := b.classify(rpc, a)
	if err.Class == backends.ClassInternal {
		err.Class = backends.ClassUnavailable
		err.Message += " (the create may have happened: retry it under the same name)"
	}
	return err
}

// source is a CreateVolume's content source, resolved on the CSP.
type source struct {
	snapshotID   string // the snapshot the CSP clones (a hidden one for a volume source)
	snapshotSize int64
	volumeID     string // for a volume source
}

// resolveSource checks that the content source exists: NOT_FOUND otherwise.
func (b *Backend) resolveSource(ctx context.Context, req *csi.CreateVolumeRequest) (source, error) {
	rpc := createVolumeRPC
	cs := req.GetVolumeContentSource()
	switch {
	case cs.GetSnapshot() != nil:
		id := cs.GetSnapshot().GetSnapshotId()
		s, err := mustFind(ctx, b, rpc, "source snapshot", id, b.getSnapshot)
		return source{snapshotID: id, snapshotSize: int64(s.Size)}, err // the caller drops it on err
	case cs.GetVolume() != nil:
		id := cs.GetVolume().GetVolumeId()
		v, err := mustFind(ctx, b, rpc, "source volume", id, b.getVolume)
		return source{volumeID: id, snapshotSize: int64(v.Size)}, err
	}
	return source{}, nil
}

// cloneSourceSnapshot returns the snapshot of volumeID that the clone called name is made
// from, creating it if needed. Its name derives from the clone's, so that a retried create
// finds it instead of leaking another; it is hidden from ListSnapshots, and deleted when the
// source volume is deleted (see deleteVolume).
func (b *Backend) cloneSourceSnapshot(ctx context.Context, volumeID, name string) (string, error) {
	rpc := createVolumeRPC
	sum := sha256.Sum256([]byte(name))
	hidden := hiddenCloneSnapshotLabel + hex.EncodeToString(sum[:12])
	if s, found, err := b.snapshotByName(ctx, rpc, volumeID, hidden); err != nil || found {
		return s.ID, err
	}
	var s snapshot
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPost, path: "/snapshots", body: snapshot{
		Name: hidden, VolumeID: volumeID, Description: "csi-gateway: source of the clone " + name,
	}}, &s)
	if err == nil && a.status == http.StatusOK {
		return s.ID, nil
	}
	if s, found, lerr := b.snapshotByName(ctx, rpc, volumeID, hidden); lerr == nil && found {
		return s.ID, nil
	}
	if err != nil {
		return "", err
	}
	return "", b.classify(rpc, a)
}

// existingVolume answers a create whose name exists: OK with it when it is what was asked
// for, ALREADY_EXISTS otherwise (CSI's rule: the capacity range, and the same source).
func (b *Backend) existingVolume(ctx context.Context, req *csi.CreateVolumeRequest, v volume, src source) (*csi.CreateVolumeResponse, error) {
	rpc := createVolumeRPC
	if !fits(int64(v.Size), req.GetCapacityRange()) {
		return nil, b.errorf(backends.ClassAlreadyExists, rpc, "volume %q exists with %d bytes, outside the capacity_range asked for", req.GetName(), int64(v.Size))
	}
	same := v.BaseSnapshotID == src.snapshotID
	if src.volumeID != "" && v.BaseSnapshotID != "" {
		s, found, err := b.getSnapshot(ctx, rpc, v.BaseSnapshotID)
		if err != nil {
			return nil, err
		}
		same = found && s.VolumeID == src.volumeID
	}
	if !same {
		return nil, b.errorf(backends.ClassAlreadyExists, rpc, "volume %q exists with another content source", req.GetName())
	}
	return b.volumeResponse(v, req.GetVolumeContentSource())
}

// volumeResponse is CreateVolume's answer for a CSP volume.
func (b *Backend) volumeResponse(v volume, cs *csi.VolumeContentSource) (*csi.CreateVolumeResponse, error) {
	vol, err := b.csiVolume(createVolumeRPC, v)
	if err != nil {
		return nil, err
	}
	vol.ContentSource = cs
	return &csi.CreateVolumeResponse{Volume: vol}, nil
}

// csiVolume is a CSP volume as CSI describes it.
func (b *Backend) csiVolume(rpc string, v volume) (*csi.Volume, error) {
	if v.ID == "" || len(v.ID) > 128 {
		return nil, b.errorf(backends.ClassInternal, rpc, "the CSP's volume ID %.40q is empty or longer than CSI's 128 bytes", v.ID)
	}
	return &csi.Volume{VolumeId: v.ID, CapacityBytes: int64(v.Size), VolumeContext: volumeContext(v.Config)}, nil
}

// deleteVolume deletes a volume; an absent one is OK. A CSP refuses to delete a volume with
// snapshots (409): when those are only the hidden sources of clones already deleted, they
// are deleted and the volume after them.
func (b *Backend) deleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	rpc := "DeleteVolume"
	id := req.GetVolumeId()
	del := request{rpc: rpc, method: http.MethodDelete, path: "/volumes/" + url.PathEscape(id), idempotent: true}
	for attempt := 0; ; attempt++ {
		a, err := b.do(ctx, del, nil)
		switch {
		case err != nil:
			return nil, err
		case a.status/100 == 2, a.notFound(b.profile):
			return &csi.DeleteVolumeResponse{}, nil
		case a.status == http.StatusConflict && attempt == 0:
			if removed, err := b.deleteHiddenSnapshots(ctx, rpc, id); err != nil || removed == 0 {
				if err != nil {
					return nil, err
				}
				return nil, b.classify(rpc, a)
			}
			continue
		}
		return nil, b.classify(rpc, a)
	}
}

// deleteHiddenSnapshots deletes the hidden clone-source snapshots of a volume that no clone
// still depends on, and returns how many it deleted.
func (b *Backend) deleteHiddenSnapshots(ctx context.Context, rpc, volumeID string) (int, error) {
	var list []snapshot
	if _, err := b.get(ctx, rpc, "/snapshots", url.Values{"volume_id": {volumeID}}, &list); err != nil {
		return 0, err
	}
	removed := 0
	for _, s := range list {
		if !strings.HasPrefix(s.Name, hiddenCloneSnapshotLabel) {
			continue
		}
		a, err := b.do(ctx, request{rpc: rpc, method: http.MethodDelete, path: "/snapshots/" + url.PathEscape(s.ID), idempotent: true}, nil)
		if err != nil {
			return removed, err
		}
		if a.status/100 == 2 {
			removed++
		}
	}
	return removed, nil
}
