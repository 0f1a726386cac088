package embedded

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func (c *controllerServer) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	a := c.a
	err := firstError(
		checkName("name", req.GetName()),
		checkCapabilities("volume_capabilities", req.GetVolumeCapabilities()),
		checkVolumeParameters("parameters", req.GetParameters(), volumeParameterKeys),
		checkVolumeParameters("mutable_parameters", req.GetMutableParameters(), mutableParameterKeys),
		checkMap("secrets", req.GetSecrets()),
		a.checkAccessibility(req.GetAccessibilityRequirements()))
	if err != nil {
		return nil, err
	}
	size, err := a.sizeFor(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	srcSnap, srcVol, err := contentSource(req.GetVolumeContentSource())
	if err != nil {
		return nil, err
	}

	out, err := createWithImages(a, func(s *state, images *[]string) (*volume, error) {
		if v := byName(s.Volumes, req.GetName()); v != nil {
			return v, compatible(v, req, srcSnap, srcVol)
		}
		src, err := a.sourceImage(s, srcSnap, srcVol, size)
		if err != nil {
			return nil, err
		}
		if err := a.checkPoolRoom(s, size); err != nil {
			return nil, err
		}
		v := &volume{
			named:             s.newNamed("vol-", req.GetName()),
			CapacityBytes:     size,
			Parameters:        req.GetParameters(),
			MutableParameters: req.GetMutableParameters(),
			SourceSnapshotID:  srcSnap,
			SourceVolumeID:    srcVol,
			CreatedAt:         time.Now().UTC(),
		}
		path := a.images.volumePath(v.ID)
		if err := a.images.create(path, src, size); err != nil {
			return nil, status.Errorf(codes.Internal, "create the image of volume %q: %v", req.GetName(), err)
		}
		*images = append(*images, path)
		s.Volumes[v.ID] = v
		return v, nil
	})
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: a.csiVolume(out)}, nil
}

// contentSource returns the snapshot or volume ID a new volume is to be made from.
func contentSource(src *csi.VolumeContentSource) (snapshotID, volumeID string, err error) {
	if src == nil {
		return "", "", nil
	}
	switch t := src.GetType().(type) {
	case *csi.VolumeContentSource_Snapshot:
		return t.Snapshot.GetSnapshotId(), "", checkRequired("volume_content_source.snapshot.snapshot_id", t.Snapshot.GetSnapshotId())
	case *csi.VolumeContentSource_Volume:
		return "", t.Volume.GetVolumeId(), checkRequired("volume_content_source.volume.volume_id", t.Volume.GetVolumeId())
	default:
		return "", "", invalid("volume_content_source: set snapshot or volume")
	}
}

// sourceImage returns the image a new volume of size bytes starts from ("" for an empty
// volume), failing with NOT_FOUND for a missing source and OUT_OF_RANGE when the new volume
// would be smaller than its source.
func (a *Appliance) sourceImage(s *state, snapID, volID string, size int64) (string, error) {
	var srcSize int64
	var path string
	switch {
	case snapID != "":
		sn := s.Snapshots[snapID]
		if sn == nil {
			return "", notFound("source snapshot", snapID)
		}
		srcSize, path = sn.SizeBytes, a.images.snapshotPath(snapID)
	case volID != "":
		v := s.Volumes[volID]
		if v == nil {
			return "", notFound("source volume", volID)
		}
		srcSize, path = v.CapacityBytes, a.images.volumePath(volID)
	default:
		return "", nil
	}
	if size < srcSize {
		return "", status.Errorf(codes.OutOfRange, "the new volume would hold %d bytes, less than its source's %d; ask for at least %d", size, srcSize, srcSize)
	}
	return path, nil
}

// compatible says why an existing volume of the same name cannot answer a CreateVolume
// (ALREADY_EXISTS), or returns nil when it can.
func compatible(v *volume, req *csi.CreateVolumeRequest, srcSnap, srcVol string) error {
	differs := func(what string) error {
		return status.Errorf(codes.AlreadyExists, "volume %q already exists as %s with a different %s; use another name or the same arguments", v.Name, v.ID, what)
	}
	switch {
	case !fits(v.CapacityBytes, req.GetCapacityRange()):
		return status.Errorf(codes.AlreadyExists, "volume %q already exists as %s with %d bytes, outside the requested capacity_range; use another name or the same arguments", v.Name, v.ID, v.CapacityBytes)
	case !maps.Equal(v.Parameters, req.GetParameters()):
		return differs("parameters")
	case !maps.Equal(v.MutableParameters, req.GetMutableParameters()) && len(req.GetMutableParameters()) > 0:
		return differs("mutable_parameters")
	case v.SourceSnapshotID != srcSnap || v.SourceVolumeID != srcVol:
		return differs("volume_content_source")
	}
	return nil
}

func (c *controllerServer) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	return respond(&csi.DeleteVolumeResponse{}, deleteOne(c.a, "volume", "volume_id", id, volumesOf, c.a.images.volumePath, func(v *volume) error {
		switch {
		case len(v.Publications) > 0:
			return status.Errorf(codes.FailedPrecondition, "volume %s is still published to node(s) %v; unpublish it first", id, slices.Sorted(maps.Keys(v.Publications)))
		case v.GroupID != "":
			return status.Errorf(codes.FailedPrecondition, "volume %s belongs to volume group %s; remove it from the group first", id, v.GroupID)
		}
		return nil
	}))
}

func (c *controllerServer) ControllerGetVolume(_ context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	id := req.GetVolumeId()
	return getRecord(c.a, "volume", id, volumesOf, func(_ *state, v *volume) (*csi.ControllerGetVolumeResponse, error) {
		return &csi.ControllerGetVolumeResponse{Volume: c.a.csiVolume(v), Status: c.a.volumeStatus(v)}, nil
	}, checkRequired("volume_id", id))
}

// volumeStatus reports where a volume is published.
func (a *Appliance) volumeStatus(v *volume) *csi.ControllerGetVolumeResponse_VolumeStatus {
	return &csi.ControllerGetVolumeResponse_VolumeStatus{PublishedNodeIds: slices.Sorted(maps.Keys(v.Publications))}
}

func (c *controllerServer) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	entries, next, err := listPage(c.a, "volumes", func(s *state) []*volume {
		return slices.Collect(maps.Values(s.Volumes))
	}, req.GetStartingToken(), req.GetMaxEntries(), func(_ *state, v *volume) *csi.ListVolumesResponse_Entry {
		return &csi.ListVolumesResponse_Entry{
			Volume: c.a.csiVolume(v),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: c.a.volumeStatus(v).PublishedNodeIds},
		}
	})
	if err != nil {
		return nil, err
	}
	return &csi.ListVolumesResponse{Entries: entries, NextToken: next}, nil
}

func (c *controllerServer) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := checkRequired("volume_id", req.GetVolumeId()); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, invalid("volume_capabilities is required")
	}
	err := c.a.view(func(s *state) error {
		if s.Volumes[req.GetVolumeId()] == nil {
			return notFound("volume", req.GetVolumeId())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := checkCapabilities("volume_capabilities", req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	if err := checkVolumeParameters("parameters", req.GetParameters(), volumeParameterKeys); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
		MutableParameters:  req.GetMutableParameters(),
	}}, nil
}

func (c *controllerServer) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	a := c.a
	if err := checkVolumeParameters("parameters", req.GetParameters(), volumeParameterKeys); err != nil {
		return nil, err
	}
	for _, cp := range req.GetVolumeCapabilities() {
		if capabilityProblem(cp) != nil {
			return &csi.GetCapacityResponse{}, nil // no capacity for what cannot be served
		}
	}
	if t := req.GetAccessibleTopology(); t != nil && !a.inZone(t) {
		return &csi.GetCapacityResponse{}, nil
	}
	var free int64
	a.view(func(s *state) error {
		free = max(a.cfg.CapacityBytes-s.usedBytes(), 0)
		return nil
	})
	return &csi.GetCapacityResponse{
		AvailableCapacity: free,
		MaximumVolumeSize: wrapperspb.Int64(min(free, a.cfg.MaxVolumeBytes)),
		MinimumVolumeSize: wrapperspb.Int64(allocationUnit),
	}, nil
}

func (c *controllerServer) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	a := c.a
	id := req.GetVolumeId()
	if err := checkRequired("volume_id", id); err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		return nil, invalid("capacity_range is required")
	}
	if req.GetVolumeCapability() != nil {
		if err := capabilityProblem(req.GetVolumeCapability()); err != nil {
			return nil, invalid("volume_capability: %v", err)
		}
	}
	size, err := a.sizeFor(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	var capacity int64
	err = a.update(func(s *state) error {
		v := s.Volumes[id]
		if v == nil {
			return notFound("volume", id)
		}
		if lim := req.GetCapacityRange().GetLimitBytes(); lim > 0 && v.CapacityBytes > lim {
			return status.Errorf(codes.OutOfRange, "volume %s already holds %d bytes, more than limit_bytes %d; volumes cannot shrink", id, v.CapacityBytes, lim)
		}
		if size <= v.CapacityBytes {
			capacity = v.CapacityBytes // already as large: nothing to do
			return nil
		}
		if err := a.checkPoolRoom(s, size-v.CapacityBytes); err != nil {
			return err
		}
		if err := a.images.grow(a.images.volumePath(id), size); err != nil {
			return status.Errorf(codes.Internal, "grow the image of volume %s: %v", id, err)
		}
		v.CapacityBytes, capacity = size, size
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The file system (or the loop device of a block volume) on a node must catch up.
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: capacity, NodeExpansionRequired: true}, nil
}

func (c *controllerServer) ControllerModifyVolume(_ context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := checkRequired("volume_id", id); err != nil {
		return nil, err
	}
	if len(req.GetMutableParameters()) == 0 {
		return nil, invalid("mutable_parameters is required")
	}
	if err := checkVolumeParameters("mutable_parameters", req.GetMutableParameters(), mutableParameterKeys); err != nil {
		return nil, err
	}
	err := c.a.update(func(s *state) error {
		v := s.Volumes[id]
		if v == nil {
			return notFound("volume", id)
		}
		if v.MutableParameters == nil {
			v.MutableParameters = map[string]string{}
		}
		maps.Copy(v.MutableParameters, req.GetMutableParameters())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &csi.ControllerModifyVolumeResponse{}, nil
}
