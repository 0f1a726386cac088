package translate

import (
	csi "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// Publishing: v1's publish_context, volume_context and secrets are v0's publish_info,
// volume_attributes and controller_publish_secrets / controller_unpublish_secrets /
// node_stage_secrets / node_publish_secrets.

func controllerPublishToV0(r *csi.ControllerPublishVolumeRequest) (*csiv0.ControllerPublishVolumeRequest, error) {
	c, err := capabilityToV0(r.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	return &csiv0.ControllerPublishVolumeRequest{VolumeId: r.GetVolumeId(), NodeId: r.GetNodeId(), VolumeCapability: c,
		Readonly: r.GetReadonly(), ControllerPublishSecrets: r.GetSecrets(), VolumeAttributes: r.GetVolumeContext()}, nil
}

func controllerPublishToV1(r *csiv0.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeRequest, error) {
	return &csi.ControllerPublishVolumeRequest{VolumeId: r.GetVolumeId(), NodeId: r.GetNodeId(), VolumeCapability: capabilityToV1(r.GetVolumeCapability()),
		Readonly: r.GetReadonly(), Secrets: r.GetControllerPublishSecrets(), VolumeContext: r.GetVolumeAttributes()}, nil
}

func controllerPublishedToV1(r *csiv0.ControllerPublishVolumeResponse) *csi.ControllerPublishVolumeResponse {
	return &csi.ControllerPublishVolumeResponse{PublishContext: r.GetPublishInfo()}
}

func controllerPublishedToV0(r *csi.ControllerPublishVolumeResponse) *csiv0.ControllerPublishVolumeResponse {
	return &csiv0.ControllerPublishVolumeResponse{PublishInfo: r.GetPublishContext()}
}

func controllerUnpublishToV0(r *csi.ControllerUnpublishVolumeRequest) (*csiv0.ControllerUnpublishVolumeRequest, error) {
	return &csiv0.ControllerUnpublishVolumeRequest{VolumeId: r.GetVolumeId(), NodeId: r.GetNodeId(), ControllerUnpublishSecrets: r.GetSecrets()}, nil
}

func controllerUnpublishToV1(r *csiv0.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeRequest, error) {
	return &csi.ControllerUnpublishVolumeRequest{VolumeId: r.GetVolumeId(), NodeId: r.GetNodeId(), Secrets: r.GetControllerUnpublishSecrets()}, nil
}

func nodeStageToV0(r *csi.NodeStageVolumeRequest) (*csiv0.NodeStageVolumeRequest, error) {
	c, err := capabilityToV0(r.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	return &csiv0.NodeStageVolumeRequest{VolumeId: r.GetVolumeId(), PublishInfo: r.GetPublishContext(), StagingTargetPath: r.GetStagingTargetPath(),
		VolumeCapability: c, NodeStageSecrets: r.GetSecrets(), VolumeAttributes: r.GetVolumeContext()}, nil
}

func nodeStageToV1(r *csiv0.NodeStageVolumeRequest) (*csi.NodeStageVolumeRequest, error) {
	return &csi.NodeStageVolumeRequest{VolumeId: r.GetVolumeId(), PublishContext: r.GetPublishInfo(), StagingTargetPath: r.GetStagingTargetPath(),
		VolumeCapability: capabilityToV1(r.GetVolumeCapability()), Secrets: r.GetNodeStageSecrets(), VolumeContext: r.GetVolumeAttributes()}, nil
}

func nodeUnstageToV0(r *csi.NodeUnstageVolumeRequest) (*csiv0.NodeUnstageVolumeRequest, error) {
	return &csiv0.NodeUnstageVolumeRequest{VolumeId: r.GetVolumeId(), StagingTargetPath: r.GetStagingTargetPath()}, nil
}

func nodeUnstageToV1(r *csiv0.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeRequest, error) {
	return &csi.NodeUnstageVolumeRequest{VolumeId: r.GetVolumeId(), StagingTargetPath: r.GetStagingTargetPath()}, nil
}

func nodePublishToV0(r *csi.NodePublishVolumeRequest) (*csiv0.NodePublishVolumeRequest, error) {
	c, err := capabilityToV0(r.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	return &csiv0.NodePublishVolumeRequest{VolumeId: r.GetVolumeId(), PublishInfo: r.GetPublishContext(), StagingTargetPath: r.GetStagingTargetPath(),
		TargetPath: r.GetTargetPath(), VolumeCapability: c, Readonly: r.GetReadonly(), NodePublishSecrets: r.GetSecrets(),
		VolumeAttributes: r.GetVolumeContext()}, nil
}

func nodePublishToV1(r *csiv0.NodePublishVolumeRequest) (*csi.NodePublishVolumeRequest, error) {
	return &csi.NodePublishVolumeRequest{VolumeId: r.GetVolumeId(), PublishContext: r.GetPublishInfo(), StagingTargetPath: r.GetStagingTargetPath(),
		TargetPath: r.GetTargetPath(), VolumeCapability: capabilityToV1(r.GetVolumeCapability()), Readonly: r.GetReadonly(),
		Secrets: r.GetNodePublishSecrets(), VolumeContext: r.GetVolumeAttributes()}, nil
}

func nodeUnpublishToV0(r *csi.NodeUnpublishVolumeRequest) (*csiv0.NodeUnpublishVolumeRequest, error) {
	return &csiv0.NodeUnpublishVolumeRequest{VolumeId: r.GetVolumeId(), TargetPath: r.GetTargetPath()}, nil
}

func nodeUnpublishToV1(r *csiv0.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeRequest, error) {
	return &csi.NodeUnpublishVolumeRequest{VolumeId: r.GetVolumeId(), TargetPath: r.GetTargetPath()}, nil
}
