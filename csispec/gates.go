package csispec

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// CapRef names one capability of one kind.
type CapRef struct {
	Kind CapKind
	Cap  int32
}

func (r CapRef) String() string {
	rpc := capRPCs[r.Kind]
	return rpc.name + " " + rpc.capName(r.Cap)
}

// ControllerCap, NodeCap, PluginCap and GroupCap name a capability of each kind.
func ControllerCap(t csi.ControllerServiceCapability_RPC_Type) CapRef {
	return CapRef{ControllerCaps, int32(t)}
}

func NodeCap(t csi.NodeServiceCapability_RPC_Type) CapRef {
	return CapRef{NodeCaps, int32(t)}
}

func PluginCap(t csi.PluginCapability_Service_Type) CapRef {
	return CapRef{PluginCaps, int32(t)}
}

func GroupCap(t csi.GroupControllerServiceCapability_RPC_Type) CapRef {
	return CapRef{GroupCaps, int32(t)}
}

// methodGates are the RPCs a plugin implements only with a capability (REQUIREMENTS §1.3,
// and the capabilities v1.13 adds). Identity RPCs, ValidateVolumeCapabilities, the
// Get*backendCaps RPCs, NodePublish/NodeUnpublish and NodeGetInfo are always implemented.
// volumegroup.* has no capability discovery (REQUIREMENTS §8 #26): not gated.
var methodGates = map[string]CapRef{
	"/csi.v1.Controller/CreateVolume":               ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
	"/csi.v1.Controller/DeleteVolume":               ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
	"/csi.v1.Controller/ControllerPublishVolume":    ControllerCap(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME),
	"/csi.v1.Controller/ControllerUnpublishVolume":  ControllerCap(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME),
	"/csi.v1.Controller/ListVolumes":                ControllerCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES),
	"/csi.v1.Controller/GetCapacity":                ControllerCap(csi.ControllerServiceCapability_RPC_GET_CAPACITY),
	"/csi.v1.Controller/CreateSnapshot":             ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
	"/csi.v1.Controller/DeleteSnapshot":             ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
	"/csi.v1.Controller/ListSnapshots":              ControllerCap(csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS),
	"/csi.v1.Controller/GetSnapshot":                ControllerCap(csi.ControllerServiceCapability_RPC_GET_SNAPSHOT),
	"/csi.v1.Controller/ControllerExpandVolume":     ControllerCap(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME),
	"/csi.v1.Controller/ControllerGetVolume":        ControllerCap(csi.ControllerServiceCapability_RPC_GET_VOLUME),
	"/csi.v1.Controller/ControllerModifyVolume":     ControllerCap(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME),
	"/csi.v1.Controller/ControllerGetVolumeHealth":  ControllerCap(csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH),
	"/csi.v1.Controller/ControllerListVolumeHealth": ControllerCap(csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH),

	"/csi.v1.Node/NodeStageVolume":      NodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
	"/csi.v1.Node/NodeUnstageVolume":    NodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
	"/csi.v1.Node/NodeGetVolumeStats":   NodeCap(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
	"/csi.v1.Node/NodeExpandVolume":     NodeCap(csi.NodeServiceCapability_RPC_EXPAND_VOLUME),
	"/csi.v1.Node/NodeGetVolumeHealth":  NodeCap(csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH),
	"/csi.v1.Node/NodeGetStorageHealth": NodeCap(csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH),

	"/csi.v1.GroupController/CreateVolumeGroupSnapshot": GroupCap(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT),
	"/csi.v1.GroupController/DeleteVolumeGroupSnapshot": GroupCap(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT),
	"/csi.v1.GroupController/GetVolumeGroupSnapshot":    GroupCap(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT),

	"/csi.v1.SnapshotMetadata/GetMetadataAllocated": PluginCap(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE),
	"/csi.v1.SnapshotMetadata/GetMetadataDelta":     PluginCap(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE),
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
var gateAlternatives = map[string][]CapRef{
	"/csi.v1.Node/NodeGetVolumeStats": {{NodeCaps, removedNodeVolumeCondition}},
}

// gateMethod refuses, with UNIMPLEMENTED, an RPC whose capability (or an alternative of it)
// the backend is known not to advertise (the caller MUST NOT retry, and may read the
// capabilities).
func gateMethod(method string, caps backendCaps) *Violation {
	ref, ok := methodGates[method]
	if !ok || !caps.lacks(ref.Kind, ref.Cap) {
		return nil
	}
	for _, alt := range gateAlternatives[method] {
		if has, _ := caps.has(alt.Kind, alt.Cap); has {
			return nil
		}
	}
	return &Violation{codes.Unimplemented, fmt.Sprintf("backend %q does not advertise the %s, which %s needs",
		caps.backend, ref, method[strings.LastIndexByte(method, '/')+1:])}
}

// requestGate returns the rules of one method's request that depend on what the backend
// advertises, appended to out. Gates append to a slice rather than record on a collector so
// that a request that breaks none costs no allocation.
type requestGate func(caps backendCaps, req proto.Message, out []Violation) []Violation

// gateOf adapts a gate of one method's typed request to a requestGate.
func gateOf[Req proto.Message](gate func(caps backendCaps, r Req, out []Violation) []Violation) requestGate {
	return func(caps backendCaps, req proto.Message, out []Violation) []Violation {
		if r, ok := req.(Req); ok {
			return gate(caps, r, out)
		}
		return out
	}
}

// mustNotSet appends that field must not be set when it is and the backend lacks ref.
func mustNotSet(out []Violation, caps backendCaps, set bool, field string, ref CapRef) []Violation {
	if set && caps.lacks(ref.Kind, ref.Cap) {
		out = append(out, Violation{codes.InvalidArgument, fmt.Sprintf("%s must not be set: backend %q does not advertise the %s",
			field, caps.backend, ref)})
	}
	return out
}

// singleNodeModeAllowed appends that vc's access mode needs ref when it is a single-node
// mode and the backend lacks ref. vc is at field, or at field[index] when index >= 0; the
// path is rendered only for a violation.
func singleNodeModeAllowed(out []Violation, caps backendCaps, field string, index int, vc *csi.VolumeCapability, ref CapRef) []Violation {
	if !singleNodeMode(vc) || !caps.lacks(ref.Kind, ref.Cap) {
		return out
	}
	if index >= 0 {
		field = fmt.Sprintf("%s[%d]", field, index)
	}
	return mustNotSet(out, caps, true, field+".access_mode "+vc.GetAccessMode().GetMode().String(), ref)
}

var (
	volumeTopology   = PluginCap(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	snapshotTopology = PluginCap(csi.PluginCapability_Service_SNAPSHOT_ACCESSIBILITY_CONSTRAINTS)
	controllerSingle = ControllerCap(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	nodeSingle       = NodeCap(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	nodeStage        = NodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
)

// requestGates are the rules of each method's request that depend on what the backend
// advertises, by full method name.
var requestGates = map[string]requestGate{
	"/csi.v1.Controller/CreateVolume": gateOf(func(caps backendCaps, r *csi.CreateVolumeRequest, out []Violation) []Violation {
		out = mustNotSet(out, caps, hasTopologyRequirement(r.GetAccessibilityRequirements()), "accessibility_requirements", volumeTopology)
		out = mustNotSet(out, caps, r.GetVolumeContentSource().GetSnapshot() != nil, "volume_content_source.snapshot",
			ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT))
		out = mustNotSet(out, caps, r.GetVolumeContentSource().GetVolume() != nil, "volume_content_source.volume",
			ControllerCap(csi.ControllerServiceCapability_RPC_CLONE_VOLUME))
		out = mustNotSet(out, caps, len(r.GetMutableParameters()) > 0, "mutable_parameters",
			ControllerCap(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME))
		for i, vc := range r.GetVolumeCapabilities() {
			out = singleNodeModeAllowed(out, caps, "volume_capabilities", i, vc, controllerSingle)
		}
		return out
	}),
	"/csi.v1.Controller/GetCapacity": gateOf(func(caps backendCaps, r *csi.GetCapacityRequest, out []Violation) []Violation {
		return mustNotSet(out, caps, r.GetAccessibleTopology() != nil, "accessible_topology", volumeTopology)
	}),
	"/csi.v1.Controller/CreateSnapshot": gateOf(func(caps backendCaps, r *csi.CreateSnapshotRequest, out []Violation) []Violation {
		return mustNotSet(out, caps, hasTopologyRequirement(r.GetAccessibilityRequirements()), "accessibility_requirements", snapshotTopology)
	}),
	"/csi.v1.Controller/ControllerPublishVolume": gateOf(func(caps backendCaps, r *csi.ControllerPublishVolumeRequest, out []Violation) []Violation {
		out = mustNotSet(out, caps, r.GetReadonly(), "readonly", ControllerCap(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY))
		return singleNodeModeAllowed(out, caps, "volume_capability", -1, r.GetVolumeCapability(), controllerSingle)
	}),
	"/csi.v1.Node/NodeStageVolume": gateOf(func(caps backendCaps, r *csi.NodeStageVolumeRequest, out []Violation) []Violation {
		return singleNodeModeAllowed(out, caps, "volume_capability", -1, r.GetVolumeCapability(), nodeSingle)
	}),
	"/csi.v1.Node/NodePublishVolume": gateOf(func(caps backendCaps, r *csi.NodePublishVolumeRequest, out []Violation) []Violation {
		out = singleNodeModeAllowed(out, caps, "volume_capability", -1, r.GetVolumeCapability(), nodeSingle)
		if r.GetStagingTargetPath() == "" {
			if has, _ := caps.has(nodeStage.Kind, nodeStage.Cap); has {
				out = append(out, Violation{codes.FailedPrecondition, fmt.Sprintf(
					"staging_target_path is required: backend %q advertises the %s; call NodeStageVolume first and pass its staging_target_path",
					caps.backend, nodeStage)})
			}
		}
		return out
	}),
}

// gateRequest checks the rules of a request that depend on what the backend advertises.
func gateRequest(method string, req proto.Message, caps backendCaps) []Violation {
	if gate := requestGates[method]; gate != nil {
		return gate(caps, req, nil)
	}
	return nil
}

// singleNodeMode reports whether vc asks for SINGLE_NODE_SINGLE_WRITER or
// SINGLE_NODE_MULTI_WRITER, which a plugin serves only with the SINGLE_NODE_MULTI_WRITER
// capability.
func singleNodeMode(vc *csi.VolumeCapability) bool {
	m := vc.GetAccessMode().GetMode()
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER || m == csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
}
