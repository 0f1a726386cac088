package csp

import (
	"context"
	"net/http"
	"net/url"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/backends"
)

// controllerGetVolume: a CSP volume says whether it is published, not where, so the status
// has no published_node_ids (LIST_VOLUMES_PUBLISHED_NODES is not advertised).
func (b *Backend) controllerGetVolume(ctx context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	rpc := "ControllerGetVolume"
	v, err := b.mustGetVolume(ctx, rpc, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	vol, err := b.csiVolume(rpc, v)
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeResponse{Volume: vol, Status: &csi.ControllerGetVolumeResponse_VolumeStatus{}}, nil
}

// mustGetVolume reads a volume the call names: NOT_FOUND when it does not exist.
func (b *Backend) mustGetVolume(ctx context.Context, rpc, id string) (volume, error) {
	v, found, err := b.getVolume(ctx, rpc, id)
	if err == nil && !found {
		err = b.notFoundError(rpc, "volume", id)
	}
	return v, err
}

// validateVolumeCapabilities checks the capabilities locally (a CSP knows nothing of access
// modes) once the volume is known to exist.
func (b *Backend) validateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if _, err := b.mustGetVolume(ctx, "ValidateVolumeCapabilities", req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters: req.GetParameters(), MutableParameters: req.GetMutableParameters(),
	}}, nil
}

// listVolumes lists every volume (GET /volumes) and pages it in the gateway.
func (b *Backend) listVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	rpc := "ListVolumes"
	if !b.profile.listVolumes {
		return nil, b.errorf(backends.ClassUnimplemented, rpc, "a %s CSP cannot list volumes", b.profile.name)
	}
	var all []volume
	if _, err := b.get(ctx, rpc, "/volumes", nil, &all); err != nil {
		return nil, err
	}
	return listPage(b, rpc, all, func(v volume) string { return v.ID }, req, func(v volume) (*csi.ListVolumesResponse_Entry, error) {
		vol, err := b.csiVolume(rpc, v)
		return &csi.ListVolumesResponse_Entry{Volume: vol}, err
	}, func(entries []*csi.ListVolumesResponse_Entry, next string) *csi.ListVolumesResponse {
		return &csi.ListVolumesResponse{Entries: entries, NextToken: next}
	})
}

// controllerExpandVolume grows a volume (PUT /volumes/{id} {size}); one already large enough
// is OK as it is. The node grows the filesystem of a mount volume.
func (b *Backend) controllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	rpc := "ControllerExpandVolume"
	v, err := b.mustGetVolume(ctx, rpc, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	if limit > 0 && int64(v.Size) > limit {
		return nil, b.errorf(backends.ClassOutOfRange, rpc, "volume %q is %d bytes, over limit_bytes %d: a CSP cannot shrink a volume", req.GetVolumeId(), int64(v.Size), limit)
	}
	size := int64(v.Size)
	if required > size {
		var grown volume
		a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPut, path: "/volumes/" + url.PathEscape(req.GetVolumeId()),
			body: volume{Size: number(required)}, idempotent: true}, &grown)
		if err != nil {
			return nil, err
		}
		if a.status != http.StatusOK {
			if a.notFound(b.profile) {
				return nil, b.notFoundError(rpc, "volume", req.GetVolumeId())
			}
			return nil, b.classify(rpc, a)
		}
		size = max(int64(grown.Size), required)
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: req.GetVolumeCapability().GetBlock() == nil}, nil
}

// controllerModifyVolume sets the mutable parameters in the volume's config; the CSP
// refuses keys it cannot change (400 "Unexpected argument": INVALID_ARGUMENT).
func (b *Backend) controllerModifyVolume(ctx context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	rpc := "ControllerModifyVolume"
	if err := b.checkMutable(rpc, req.GetMutableParameters()); err != nil {
		return nil, err
	}
	config, _ := volumeConfig(req.GetMutableParameters())
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPut, path: "/volumes/" + url.PathEscape(req.GetVolumeId()),
		body: volume{Config: config}, idempotent: true}, nil)
	switch {
	case err != nil:
		return nil, err
	case a.status == http.StatusOK:
		return &csi.ControllerModifyVolumeResponse{}, nil
	case a.notFound(b.profile):
		return nil, b.notFoundError(rpc, "volume", req.GetVolumeId())
	}
	return nil, b.classify(rpc, a)
}
