package embedded

import (
	"context"
	"slices"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// publishContextReadonly is the publish_context key telling the node side how the volume was
// published, so NodeStage and NodePublish can refuse to write a read-only publication.
const publishContextReadonly = "readonly"

func (c *controllerServer) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	a := c.a
	id, node := req.GetVolumeId(), req.GetNodeId()
	if err := checkRequired("volume_id", id); err != nil {
		return nil, err
	}
	if node == "" {
		return nil, invalid("node_id is required")
	}
	if req.GetVolumeCapability() == nil {
		return nil, invalid("volume_capability is required")
	}
	if err := capabilityProblem(req.GetVolumeCapability()); err != nil {
		return nil, invalid("volume_capability: %v", err)
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	want := publication{AccessMode: mode.String(), Readonly: req.GetReadonly()}
	err := a.update(func(s *state) error {
		v := s.Volumes[id]
		if v == nil {
			return notFound("volume", id)
		}
		if !a.knowsNode(node) {
			return notFound("node", node)
		}
		if have, ok := v.Publications[node]; ok {
			if have != want {
				return status.Errorf(codes.AlreadyExists, "volume %s is already published to node %s as %s (readonly=%t); unpublish it before publishing it as %s (readonly=%t)", id, node, have.AccessMode, have.Readonly, want.AccessMode, want.Readonly)
			}
			return nil
		}
		for other, p := range v.Publications {
			if !isMultiNode(p.AccessMode) || !isMultiNode(want.AccessMode) {
				return status.Errorf(codes.FailedPrecondition, "volume %s is published to node %s and its access mode allows one node only; unpublish it from %s first", id, other, other)
			}
		}
		if limit := a.cfg.MaxVolumesPerNode; limit > 0 && countPublished(s, node) >= limit {
			return status.Errorf(codes.ResourceExhausted, "node %s already has %d volumes published, the most it may have; unpublish one first", node, limit)
		}
		if v.Publications == nil {
			v.Publications = map[string]publication{}
		}
		v.Publications[node] = want
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{
		publishContextReadonly: strconv.FormatBool(want.Readonly),
	}}, nil
}

func (c *controllerServer) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	id, node := req.GetVolumeId(), req.GetNodeId()
	if err := checkRequired("volume_id", id); err != nil {
		return nil, err
	}
	err := c.a.update(func(s *state) error {
		v := s.Volumes[id]
		if v == nil {
			return nil // a volume that no longer exists is published nowhere: OK
		}
		if node == "" {
			v.Publications = nil // from every node, as the spec requires
		} else {
			delete(v.Publications, node)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (a *Appliance) knowsNode(id string) bool {
	return id == a.cfg.NodeID || slices.Contains(a.cfg.KnownNodes, id)
}

func countPublished(s *state, node string) int64 {
	var n int64
	for _, v := range s.Volumes {
		if _, ok := v.Publications[node]; ok {
			n++
		}
	}
	return n
}

func isReadOnlyMode(m csi.VolumeCapability_AccessMode_Mode) bool {
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY || m == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}
