package redact

import "google.golang.org/protobuf/reflect/protoreflect"

// specSecretFields are the fields the CSI specs call secret or sensitive without an option
// marking them, by full name. CSI v0 (proto package csi.v0, compiled in as internal/csiv0)
// predates the csi_secret option: its secret maps are named here from the v0.2 and v0.3 spec
// texts ("This information is sensitive and MUST be treated as such"), the same list that
// WithSecretFields extends for the protos an operator hands the gateway.
var specSecretFields = []protoreflect.FullName{
	// "mount_flags MAY contain sensitive information" (v1 and v0 §CreateVolume), unmarked.
	"csi.v1.VolumeCapability.MountVolume.mount_flags",
	"csi.v0.VolumeCapability.MountVolume.mount_flags",

	"csi.v0.CreateVolumeRequest.controller_create_secrets",
	"csi.v0.DeleteVolumeRequest.controller_delete_secrets",
	"csi.v0.ControllerPublishVolumeRequest.controller_publish_secrets",
	"csi.v0.ControllerUnpublishVolumeRequest.controller_unpublish_secrets",
	"csi.v0.NodeStageVolumeRequest.node_stage_secrets",
	"csi.v0.NodePublishVolumeRequest.node_publish_secrets",
	"csi.v0.CreateSnapshotRequest.create_snapshot_secrets", // v0.3
	"csi.v0.DeleteSnapshotRequest.delete_snapshot_secrets", // v0.3
}

// specContextFieldNames are the names (in any message) of the string maps whose values are
// secret unless their key is safe: v1's contexts and the VolumeGroup proposal's.
var specContextFieldNames = []protoreflect.Name{"volume_context", "publish_context", "volume_group_context"}

// specContextFields are CSI v0's counterparts of v1's contexts, by full name (v0 calls them
// attributes and publish_info; "attributes" is too common a name to match in any message).
// The v0 spec says attributes "SHOULD NOT contain sensitive information", but drivers put CHAP
// secrets there as they do in v1's volume_context, so they are treated alike.
var specContextFields = []protoreflect.FullName{
	"csi.v0.Volume.attributes",
	"csi.v0.ControllerPublishVolumeRequest.volume_attributes",
	"csi.v0.ControllerPublishVolumeResponse.publish_info",
	"csi.v0.ValidateVolumeCapabilitiesRequest.volume_attributes",
	"csi.v0.NodeStageVolumeRequest.publish_info",
	"csi.v0.NodeStageVolumeRequest.volume_attributes",
	"csi.v0.NodePublishVolumeRequest.publish_info",
	"csi.v0.NodePublishVolumeRequest.volume_attributes",
}
