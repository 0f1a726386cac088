package proxy

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// capRef names one capability of one kind.
type capRef struct {
	kind capKind
	cap  int32
}

func (r capRef) String() string {
	var name string
	switch r.kind {
	case pluginCaps:
		name = csi.PluginCapability_Service_Type(r.cap).String()
	case controllerCaps:
		name = csi.ControllerServiceCapability_RPC_Type(r.cap).String()
	case nodeCaps:
		name = csi.NodeServiceCapability_RPC_Type(r.cap).String()
	case groupCaps:
		name = csi.GroupControllerServiceCapability_RPC_Type(r.cap).String()
	}
	return capRPCs[r.kind].name + " " + name
}

func ctrlCap(t csi.ControllerServiceCapability_RPC_Type) capRef {
	return capRef{controllerCaps, int32(t)}
}

func nodeCap(t csi.NodeServiceCapability_RPC_Type) capRef {
	return capRef{nodeCaps, int32(t)}
}

func pluginCap(t csi.PluginCapability_Service_Type) capRef {
	return capRef{pluginCaps, int32(t)}
}

// methodGates are the RPCs a plugin implements only with a capability (REQUIREMENTS §1.3,
// and the capabilities v1.13 adds). Identity RPCs, ValidateVolumeCapabilities, the
// Get*Capabilities RPCs, NodePublish/NodeUnpublish and NodeGetInfo are always implemented.
// volumegroup.* has no capability discovery (REQUIREMENTS §8 #26): not gated.
var methodGates = map[string]capRef{
	"/csi.v1.Controller/CreateVolume":               ctrlCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
	"/csi.v1.Controller/DeleteVolume":               ctrlCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
	"/csi.v1.Controller/ControllerPublishVolume":    ctrlCap(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME),
	"/csi.v1.Controller/ControllerUnpublishVolume":  ctrlCap(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME),
	"/csi.v1.Controller/ListVolumes":                ctrlCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES),
	"/csi.v1.Controller/GetCapacity":                ctrlCap(csi.ControllerServiceCapability_RPC_GET_CAPACITY),
	"/csi.v1.Controller/CreateSnapshot":             ctrlCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
	"/csi.v1.Controller/DeleteSnapshot":             ctrlCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
	"/csi.v1.Controller/ListSnapshots":              ctrlCap(csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS),
	"/csi.v1.Controller/GetSnapshot":                ctrlCap(csi.ControllerServiceCapability_RPC_GET_SNAPSHOT),
	"/csi.v1.Controller/ControllerExpandVolume":     ctrlCap(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME),
	"/csi.v1.Controller/ControllerGetVolume":        ctrlCap(csi.ControllerServiceCapability_RPC_GET_VOLUME),
	"/csi.v1.Controller/ControllerModifyVolume":     ctrlCap(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME),
	"/csi.v1.Controller/ControllerGetVolumeHealth":  ctrlCap(csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH),
	"/csi.v1.Controller/ControllerListVolumeHealth": ctrlCap(csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH),

	"/csi.v1.Node/NodeStageVolume":      nodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
	"/csi.v1.Node/NodeUnstageVolume":    nodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
	"/csi.v1.Node/NodeGetVolumeStats":   nodeCap(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
	"/csi.v1.Node/NodeExpandVolume":     nodeCap(csi.NodeServiceCapability_RPC_EXPAND_VOLUME),
	"/csi.v1.Node/NodeGetVolumeHealth":  nodeCap(csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH),
	"/csi.v1.Node/NodeGetStorageHealth": nodeCap(csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH),

	"/csi.v1.GroupController/CreateVolumeGroupSnapshot": {groupCaps, int32(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)},
	"/csi.v1.GroupController/DeleteVolumeGroupSnapshot": {groupCaps, int32(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)},
	"/csi.v1.GroupController/GetVolumeGroupSnapshot":    {groupCaps, int32(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)},

	"/csi.v1.SnapshotMetadata/GetMetadataAllocated": pluginCap(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE),
	"/csi.v1.SnapshotMetadata/GetMetadataDelta":     pluginCap(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE),
}

// removedNodeVolumeCondition is the node capability VOLUME_CONDITION (4), an alpha API that
// v1.13 removed and reserves.
const removedNodeVolumeCondition int32 = 4

// gateAlternatives are capabilities that open a method as well as its methodGates one:
// values an older spec defined and v1.13 removed, which plugins of that spec still
// advertise. Up to v1.12 a node plugin "MUST implement [NodeGetVolumeStats] if it has
// GET_VOLUME_STATS node capability or VOLUME_CONDITION node capability": a driver of that
// time advertising only VOLUME_CONDITION serves it, and refusing it would break it behind
// the gateway for no fault of its own.
var gateAlternatives = map[string][]capRef{
	"/csi.v1.Node/NodeGetVolumeStats": {{nodeCaps, removedNodeVolumeCondition}},
}

// gateMethod refuses, with UNIMPLEMENTED, an RPC whose capability (or an alternative of it)
// the backend is known not to advertise (the caller MUST NOT retry, and may read the
// capabilities).
func gateMethod(method string, caps capView) *violation {
	ref, ok := methodGates[method]
	if !ok || !caps.lacks(ref.kind, ref.cap) {
		return nil
	}
	for _, alt := range gateAlternatives[method] {
		if has, _ := caps.has(alt.kind, alt.cap); has {
			return nil
		}
	}
	return &violation{codes.Unimplemented, fmt.Sprintf("backend %q does not advertise the %s, which %s needs",
		caps.backend, ref, method[strings.LastIndexByte(method, '/')+1:])}
}

// gateRequest checks the rules of a request that depend on what the backend advertises.
func gateRequest(method string, req proto.Message, caps capView) []violation {
	var out []violation
	invalid := func(field string, ref capRef) {
		out = append(out, violation{codes.InvalidArgument, fmt.Sprintf("%s must not be set: backend %q does not advertise the %s",
			field, caps.backend, ref)})
	}
	single := ctrlCap(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	switch r := req.(type) {
	case *csi.CreateVolumeRequest:
		if ref := pluginCap(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS); hasTopologyRequirement(r.GetAccessibilityRequirements()) && caps.lacks(ref.kind, ref.cap) {
			invalid("accessibility_requirements", ref)
		}
		if ref := ctrlCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT); r.GetVolumeContentSource().GetSnapshot() != nil && caps.lacks(ref.kind, ref.cap) {
			invalid("volume_content_source.snapshot", ref)
		}
		if ref := ctrlCap(csi.ControllerServiceCapability_RPC_CLONE_VOLUME); r.GetVolumeContentSource().GetVolume() != nil && caps.lacks(ref.kind, ref.cap) {
			invalid("volume_content_source.volume", ref)
		}
		if ref := ctrlCap(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME); len(r.GetMutableParameters()) > 0 && caps.lacks(ref.kind, ref.cap) {
			invalid("mutable_parameters", ref)
		}
		for i, vc := range r.GetVolumeCapabilities() {
			if singleNodeMode(vc) && caps.lacks(single.kind, single.cap) {
				invalid(fmt.Sprintf("volume_capabilities[%d].access_mode %s", i, vc.GetAccessMode().GetMode()), single)
			}
		}
	case *csi.GetCapacityRequest:
		if ref := pluginCap(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS); r.GetAccessibleTopology() != nil && caps.lacks(ref.kind, ref.cap) {
			invalid("accessible_topology", ref)
		}
	case *csi.CreateSnapshotRequest:
		if ref := pluginCap(csi.PluginCapability_Service_SNAPSHOT_ACCESSIBILITY_CONSTRAINTS); hasTopologyRequirement(r.GetAccessibilityRequirements()) && caps.lacks(ref.kind, ref.cap) {
			invalid("accessibility_requirements", ref)
		}
	case *csi.ControllerPublishVolumeRequest:
		if ref := ctrlCap(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY); r.GetReadonly() && caps.lacks(ref.kind, ref.cap) {
			invalid("readonly", ref)
		}
		if singleNodeMode(r.GetVolumeCapability()) && caps.lacks(single.kind, single.cap) {
			invalid("volume_capability.access_mode "+r.GetVolumeCapability().GetAccessMode().GetMode().String(), single)
		}
	case *csi.NodeStageVolumeRequest:
		if ref := nodeCap(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER); singleNodeMode(r.GetVolumeCapability()) && caps.lacks(ref.kind, ref.cap) {
			invalid("volume_capability.access_mode "+r.GetVolumeCapability().GetAccessMode().GetMode().String(), ref)
		}
	case *csi.NodePublishVolumeRequest:
		if ref := nodeCap(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER); singleNodeMode(r.GetVolumeCapability()) && caps.lacks(ref.kind, ref.cap) {
			invalid("volume_capability.access_mode "+r.GetVolumeCapability().GetAccessMode().GetMode().String(), ref)
		}
		stage := nodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
		if r.GetStagingTargetPath() == "" {
			if has, _ := caps.has(stage.kind, stage.cap); has {
				out = append(out, violation{codes.FailedPrecondition, fmt.Sprintf(
					"staging_target_path is required: backend %q advertises the %s; call NodeStageVolume first and pass its staging_target_path",
					caps.backend, stage)})
			}
		}
	}
	return out
}

// singleNodeMode reports whether vc asks for SINGLE_NODE_SINGLE_WRITER or
// SINGLE_NODE_MULTI_WRITER, which a plugin serves only with the SINGLE_NODE_MULTI_WRITER
// capability.
func singleNodeMode(vc *csi.VolumeCapability) bool {
	m := vc.GetAccessMode().GetMode()
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER || m == csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
}
