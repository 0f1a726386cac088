package translate

import (
	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// translations are the methods a caller of one version may call on a backend of the other,
// by the caller's full method name. A v1 method missing here has no v0 equivalent (the
// expansion, stats, condition, get, modify and group RPCs, the GroupController and
// SnapshotMetadata services): UNIMPLEMENTED, and its capability is never advertised.
// Every v0 method is here.
var translations = map[string]rpc{
	// A v1 caller, a v0 driver.
	"/csi.v1.Identity/GetPluginInfo": convert("/csi.v0.Identity/GetPluginInfo",
		empty[*csi.GetPluginInfoRequest, *csiv0.GetPluginInfoRequest], same[*csiv0.GetPluginInfoResponse, *csi.GetPluginInfoResponse, *csi.GetPluginInfoRequest](pluginInfoToV1)),
	"/csi.v1.Identity/GetPluginCapabilities": convert("/csi.v0.Identity/GetPluginCapabilities",
		empty[*csi.GetPluginCapabilitiesRequest, *csiv0.GetPluginCapabilitiesRequest], same[*csiv0.GetPluginCapabilitiesResponse, *csi.GetPluginCapabilitiesResponse, *csi.GetPluginCapabilitiesRequest](pluginCapabilitiesToV1)),
	"/csi.v1.Identity/Probe": convert("/csi.v0.Identity/Probe",
		empty[*csi.ProbeRequest, *csiv0.ProbeRequest], same[*csiv0.ProbeResponse, *csi.ProbeResponse, *csi.ProbeRequest](probedToV1)),
	"/csi.v1.Controller/CreateVolume": convert("/csi.v0.Controller/CreateVolume",
		createVolumeToV0, same[*csiv0.CreateVolumeResponse, *csi.CreateVolumeResponse, *csi.CreateVolumeRequest](createdVolumeToV1)),
	"/csi.v1.Controller/DeleteVolume": convert("/csi.v0.Controller/DeleteVolume",
		deleteVolumeToV0, emptyAnswer[*csiv0.DeleteVolumeResponse, *csi.DeleteVolumeResponse, *csi.DeleteVolumeRequest]),
	"/csi.v1.Controller/ControllerPublishVolume": convert("/csi.v0.Controller/ControllerPublishVolume",
		controllerPublishToV0, same[*csiv0.ControllerPublishVolumeResponse, *csi.ControllerPublishVolumeResponse, *csi.ControllerPublishVolumeRequest](controllerPublishedToV1)),
	"/csi.v1.Controller/ControllerUnpublishVolume": unpublishedWhenNotFound(convert("/csi.v0.Controller/ControllerUnpublishVolume",
		controllerUnpublishToV0, emptyAnswer[*csiv0.ControllerUnpublishVolumeResponse, *csi.ControllerUnpublishVolumeResponse, *csi.ControllerUnpublishVolumeRequest])),
	"/csi.v1.Controller/ValidateVolumeCapabilities": convert("/csi.v0.Controller/ValidateVolumeCapabilities",
		validateToV0, validatedToV1),
	"/csi.v1.Controller/ListVolumes": convert("/csi.v0.Controller/ListVolumes",
		listVolumesToV0, same[*csiv0.ListVolumesResponse, *csi.ListVolumesResponse, *csi.ListVolumesRequest](listedVolumesToV1)),
	"/csi.v1.Controller/GetCapacity": convert("/csi.v0.Controller/GetCapacity",
		getCapacityToV0, same[*csiv0.GetCapacityResponse, *csi.GetCapacityResponse, *csi.GetCapacityRequest](capacityToV1)),
	"/csi.v1.Controller/ControllerGetCapabilities": convert("/csi.v0.Controller/ControllerGetCapabilities",
		empty[*csi.ControllerGetCapabilitiesRequest, *csiv0.ControllerGetCapabilitiesRequest], same[*csiv0.ControllerGetCapabilitiesResponse, *csi.ControllerGetCapabilitiesResponse, *csi.ControllerGetCapabilitiesRequest](controllerCapabilitiesToV1)),
	"/csi.v1.Controller/CreateSnapshot": convert("/csi.v0.Controller/CreateSnapshot",
		createSnapshotToV0, createdSnapshotToV1),
	"/csi.v1.Controller/DeleteSnapshot": convert("/csi.v0.Controller/DeleteSnapshot",
		deleteSnapshotToV0, emptyAnswer[*csiv0.DeleteSnapshotResponse, *csi.DeleteSnapshotResponse, *csi.DeleteSnapshotRequest]),
	"/csi.v1.Controller/ListSnapshots": convert("/csi.v0.Controller/ListSnapshots",
		listSnapshotsToV0, same[*csiv0.ListSnapshotsResponse, *csi.ListSnapshotsResponse, *csi.ListSnapshotsRequest](listedSnapshotsToV1)),
	"/csi.v1.Node/NodeStageVolume": convert("/csi.v0.Node/NodeStageVolume",
		nodeStageToV0, emptyAnswer[*csiv0.NodeStageVolumeResponse, *csi.NodeStageVolumeResponse, *csi.NodeStageVolumeRequest]),
	"/csi.v1.Node/NodeUnstageVolume": convert("/csi.v0.Node/NodeUnstageVolume",
		nodeUnstageToV0, emptyAnswer[*csiv0.NodeUnstageVolumeResponse, *csi.NodeUnstageVolumeResponse, *csi.NodeUnstageVolumeRequest]),
	"/csi.v1.Node/NodePublishVolume":   nodePublishOnV0,
	"/csi.v1.Node/NodeUnpublishVolume": nodeUnpublishOnV0,
	"/csi.v1.Node/NodeGetCapabilities": convert("/csi.v0.Node/NodeGetCapabilities",
		empty[*csi.NodeGetCapabilitiesRequest, *csiv0.NodeGetCapabilitiesRequest], same[*csiv0.NodeGetCapabilitiesResponse, *csi.NodeGetCapabilitiesResponse, *csi.NodeGetCapabilitiesRequest](nodeCapabilitiesToV1)),
	"/csi.v1.Node/NodeGetInfo": nodeInfoFromV0,

	// A v0 caller, a v1 backend.
	"/csi.v0.Identity/GetPluginInfo": convert("/csi.v1.Identity/GetPluginInfo",
		empty[*csiv0.GetPluginInfoRequest, *csi.GetPluginInfoRequest], same[*csi.GetPluginInfoResponse, *csiv0.GetPluginInfoResponse, *csiv0.GetPluginInfoRequest](pluginInfoToV0)),
	"/csi.v0.Identity/GetPluginCapabilities": convert("/csi.v1.Identity/GetPluginCapabilities",
		empty[*csiv0.GetPluginCapabilitiesRequest, *csi.GetPluginCapabilitiesRequest], same[*csi.GetPluginCapabilitiesResponse, *csiv0.GetPluginCapabilitiesResponse, *csiv0.GetPluginCapabilitiesRequest](pluginCapabilitiesToV0)),
	"/csi.v0.Identity/Probe": convert("/csi.v1.Identity/Probe",
		empty[*csiv0.ProbeRequest, *csi.ProbeRequest], same[*csi.ProbeResponse, *csiv0.ProbeResponse, *csiv0.ProbeRequest](probedToV0)),
	"/csi.v0.Controller/CreateVolume": convert("/csi.v1.Controller/CreateVolume",
		createVolumeToV1, same[*csi.CreateVolumeResponse, *csiv0.CreateVolumeResponse, *csiv0.CreateVolumeRequest](createdVolumeToV0)),
	"/csi.v0.Controller/DeleteVolume": convert("/csi.v1.Controller/DeleteVolume",
		deleteVolumeToV1, emptyAnswer[*csi.DeleteVolumeResponse, *csiv0.DeleteVolumeResponse, *csiv0.DeleteVolumeRequest]),
	"/csi.v0.Controller/ControllerPublishVolume": convert("/csi.v1.Controller/ControllerPublishVolume",
		controllerPublishToV1, same[*csi.ControllerPublishVolumeResponse, *csiv0.ControllerPublishVolumeResponse, *csiv0.ControllerPublishVolumeRequest](controllerPublishedToV0)),
	"/csi.v0.Controller/ControllerUnpublishVolume": convert("/csi.v1.Controller/ControllerUnpublishVolume",
		controllerUnpublishToV1, emptyAnswer[*csi.ControllerUnpublishVolumeResponse, *csiv0.ControllerUnpublishVolumeResponse, *csiv0.ControllerUnpublishVolumeRequest]),
	"/csi.v0.Controller/ValidateVolumeCapabilities": convert("/csi.v1.Controller/ValidateVolumeCapabilities",
		validateToV1, same[*csi.ValidateVolumeCapabilitiesResponse, *csiv0.ValidateVolumeCapabilitiesResponse, *csiv0.ValidateVolumeCapabilitiesRequest](validatedToV0)),
	"/csi.v0.Controller/ListVolumes": convert("/csi.v1.Controller/ListVolumes",
		listVolumesToV1, same[*csi.ListVolumesResponse, *csiv0.ListVolumesResponse, *csiv0.ListVolumesRequest](listedVolumesToV0)),
	"/csi.v0.Controller/GetCapacity": convert("/csi.v1.Controller/GetCapacity",
		getCapacityToV1, same[*csi.GetCapacityResponse, *csiv0.GetCapacityResponse, *csiv0.GetCapacityRequest](capacityToV0)),
	"/csi.v0.Controller/ControllerGetCapabilities": convert("/csi.v1.Controller/ControllerGetCapabilities",
		empty[*csiv0.ControllerGetCapabilitiesRequest, *csi.ControllerGetCapabilitiesRequest], same[*csi.ControllerGetCapabilitiesResponse, *csiv0.ControllerGetCapabilitiesResponse, *csiv0.ControllerGetCapabilitiesRequest](controllerCapabilitiesToV0)),
	"/csi.v0.Controller/CreateSnapshot": convert("/csi.v1.Controller/CreateSnapshot",
		createSnapshotToV1, same[*csi.CreateSnapshotResponse, *csiv0.CreateSnapshotResponse, *csiv0.CreateSnapshotRequest](createdSnapshotToV0)),
	"/csi.v0.Controller/DeleteSnapshot": convert("/csi.v1.Controller/DeleteSnapshot",
		deleteSnapshotToV1, emptyAnswer[*csi.DeleteSnapshotResponse, *csiv0.DeleteSnapshotResponse, *csiv0.DeleteSnapshotRequest]),
	"/csi.v0.Controller/ListSnapshots": convert("/csi.v1.Controller/ListSnapshots",
		listSnapshotsToV1, same[*csi.ListSnapshotsResponse, *csiv0.ListSnapshotsResponse, *csiv0.ListSnapshotsRequest](listedSnapshotsToV0)),
	"/csi.v0.Node/NodeStageVolume": convert("/csi.v1.Node/NodeStageVolume",
		nodeStageToV1, emptyAnswer[*csi.NodeStageVolumeResponse, *csiv0.NodeStageVolumeResponse, *csiv0.NodeStageVolumeRequest]),
	"/csi.v0.Node/NodeUnstageVolume": convert("/csi.v1.Node/NodeUnstageVolume",
		nodeUnstageToV1, emptyAnswer[*csi.NodeUnstageVolumeResponse, *csiv0.NodeUnstageVolumeResponse, *csiv0.NodeUnstageVolumeRequest]),
	"/csi.v0.Node/NodePublishVolume": convert("/csi.v1.Node/NodePublishVolume",
		nodePublishToV1, emptyAnswer[*csi.NodePublishVolumeResponse, *csiv0.NodePublishVolumeResponse, *csiv0.NodePublishVolumeRequest]),
	"/csi.v0.Node/NodeUnpublishVolume": convert("/csi.v1.Node/NodeUnpublishVolume",
		nodeUnpublishToV1, emptyAnswer[*csi.NodeUnpublishVolumeResponse, *csiv0.NodeUnpublishVolumeResponse, *csiv0.NodeUnpublishVolumeRequest]),
	"/csi.v0.Node/NodeGetCapabilities": convert("/csi.v1.Node/NodeGetCapabilities",
		empty[*csiv0.NodeGetCapabilitiesRequest, *csi.NodeGetCapabilitiesRequest], same[*csi.NodeGetCapabilitiesResponse, *csiv0.NodeGetCapabilitiesResponse, *csiv0.NodeGetCapabilitiesRequest](nodeCapabilitiesToV0)),
	"/csi.v0.Node/NodeGetInfo": convert("/csi.v1.Node/NodeGetInfo",
		empty[*csiv0.NodeGetInfoRequest, *csi.NodeGetInfoRequest], same[*csi.NodeGetInfoResponse, *csiv0.NodeGetInfoResponse, *csiv0.NodeGetInfoRequest](nodeInfoToV0)),
	"/csi.v0.Node/NodeGetId": convert("/csi.v1.Node/NodeGetInfo",
		empty[*csiv0.NodeGetIdRequest, *csi.NodeGetInfoRequest], same[*csi.NodeGetInfoResponse, *csiv0.NodeGetIdResponse, *csiv0.NodeGetIdRequest](nodeIDToV0)),
}

// empty is the down of a method whose request has no fields.
func empty[From, To proto.Message](From) (To, error) { return newMessage[To](), nil }

// emptyAnswer is the up of a method whose response has no fields.
func emptyAnswer[From, To proto.Message, Req any](From, Req) (To, error) {
	return newMessage[To](), nil
}
