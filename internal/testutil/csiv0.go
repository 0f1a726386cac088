package testutil

import (
	"google.golang.org/protobuf/proto"

	csi "github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// V0Requests returns a request of every CSI v0 method (v0.2 and v0.3's), by full method name,
// valid by the v0 spec's rules: each names volume vol-1, node node-1 or snapshot snap-1. The
// secret maps of the RPCs that have one (every v0 RPC with secrets has its own field) are
// set to secrets; nil leaves them out. Each call returns fresh messages.
func V0Requests(secrets map[string]string) map[string]proto.Message {
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	capabilities := func() *csi.VolumeCapability { return proto.Clone(capability).(*csi.VolumeCapability) }
	return map[string]proto.Message{
		"/csi.v0.Identity/GetPluginInfo":         &csi.GetPluginInfoRequest{},
		"/csi.v0.Identity/GetPluginCapabilities": &csi.GetPluginCapabilitiesRequest{},
		"/csi.v0.Identity/Probe":                 &csi.ProbeRequest{},
		"/csi.v0.Controller/CreateVolume": &csi.CreateVolumeRequest{Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
			VolumeCapabilities: []*csi.VolumeCapability{capabilities()}, ControllerCreateSecrets: secrets},
		"/csi.v0.Controller/DeleteVolume": &csi.DeleteVolumeRequest{VolumeId: "vol-1", ControllerDeleteSecrets: secrets},
		"/csi.v0.Controller/ControllerPublishVolume": &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1",
			VolumeCapability: capabilities(), ControllerPublishSecrets: secrets},
		"/csi.v0.Controller/ControllerUnpublishVolume": &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1",
			ControllerUnpublishSecrets: secrets},
		"/csi.v0.Controller/ValidateVolumeCapabilities": &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1",
			VolumeCapabilities: []*csi.VolumeCapability{capabilities()}},
		"/csi.v0.Controller/ListVolumes":               &csi.ListVolumesRequest{MaxEntries: 10},
		"/csi.v0.Controller/GetCapacity":               &csi.GetCapacityRequest{},
		"/csi.v0.Controller/ControllerGetCapabilities": &csi.ControllerGetCapabilitiesRequest{},
		"/csi.v0.Controller/CreateSnapshot": &csi.CreateSnapshotRequest{SourceVolumeId: "vol-1", Name: "snap-1",
			CreateSnapshotSecrets: secrets},
		"/csi.v0.Controller/DeleteSnapshot": &csi.DeleteSnapshotRequest{SnapshotId: "snap-1", DeleteSnapshotSecrets: secrets},
		"/csi.v0.Controller/ListSnapshots":  &csi.ListSnapshotsRequest{},
		"/csi.v0.Node/NodeStageVolume": &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging/vol-1",
			VolumeCapability: capabilities(), NodeStageSecrets: secrets},
		"/csi.v0.Node/NodeUnstageVolume": &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging/vol-1"},
		"/csi.v0.Node/NodePublishVolume": &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging/vol-1",
			TargetPath: "/target/vol-1", VolumeCapability: capabilities(), NodePublishSecrets: secrets},
		"/csi.v0.Node/NodeUnpublishVolume": &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/target/vol-1"},
		"/csi.v0.Node/NodeGetId":           &csi.NodeGetIdRequest{},
		"/csi.v0.Node/NodeGetInfo":         &csi.NodeGetInfoRequest{},
		"/csi.v0.Node/NodeGetCapabilities": &csi.NodeGetCapabilitiesRequest{},
	}
}
