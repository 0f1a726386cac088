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
	var name string
	switch r.Kind {
	case PluginCaps:
		name = csi.PluginCapability_Service_Type(r.Cap).String()
	case ControllerCaps:
		name = csi.ControllerServiceCapability_RPC_Type(r.Cap).String()
	case NodeCaps:
		name = csi.NodeServiceCapability_RPC_Type(r.Cap).String()
	case GroupCaps:
		name = csi.GroupControllerServiceCapability_RPC_Type(r.Cap).String()
	}
	return capRPCs[r.Kind].name + " " + name
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

// requestGate records on g the rules of one method's request that depend on what the backend
// advertises.
type requestGate func(g *gateCheck, req proto.Message)

// gateOf adapts a gate of one method's typed request to a requestGate.
func gateOf[Req proto.Message](gate func(g *gateCheck, r Req)) requestGate {
	return func(g *gateCheck, req proto.Message) {
		if r, ok := req.(Req); ok {
			gate(g, r)
		}
	}
}

// gateCheck collects the violations of the request gates of one call.
type gateCheck struct {
	caps backendCaps
	out  []Violation
}

// invalid records that field must not be set, the backend not advertising ref, when it lacks it.
func (g *gateCheck) invalid(set bool, field string, ref CapRef) {
	if set && g.caps.lacks(ref.Kind, ref.Cap) {
		g.out = append(g.out, Violation{codes.InvalidArgument, fmt.Sprintf("%s must not be set: backend %q does not advertise the %s",
			field, g.caps.backend, ref)})
	}
}

// singleNodeModes records a single-node access mode the backend does not advertise ref for.
func (g *gateCheck) singleNodeMode(field string, vc *csi.VolumeCapability, ref CapRef) {
	g.invalid(singleNodeMode(vc), field+".access_mode "+vc.GetAccessMode().GetMode().String(), ref)
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
	"/csi.v1.Controller/CreateVolume": gateOf(func(g *gateCheck, r *csi.CreateVolumeRequest) {
		g.invalid(hasTopologyRequirement(r.GetAccessibilityRequirements()), "accessibility_requirements", volumeTopology)
		g.invalid(r.GetVolumeContentSource().GetSnapshot() != nil, "volume_content_source.snapshot",
			ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT))
		g.invalid(r.GetVolumeContentSource().GetVolume() != nil, "volume_content_source.volume",
			ControllerCap(csi.ControllerServiceCapability_RPC_CLONE_VOLUME))
		g.invalid(len(r.GetMutableParameters()) > 0, "mutable_parameters", ControllerCap(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME))
		for i, vc := range r.GetVolumeCapabilities() {
			g.singleNodeMode(fmt.Sprintf("volume_capabilities[%d]", i), vc, controllerSingle)
		}
	}),
	"/csi.v1.Controller/GetCapacity": gateOf(func(g *gateCheck, r *csi.GetCapacityRequest) {
		g.invalid(r.GetAccessibleTopology() != nil, "accessible_topology", volumeTopology)
	}),
	"/csi.v1.Controller/CreateSnapshot": gateOf(func(g *gateCheck, r *csi.CreateSnapshotRequest) {
		g.invalid(hasTopologyRequirement(r.GetAccessibilityRequirements()), "accessibility_requirements", snapshotTopology)
	}),
	"/csi.v1.Controller/ControllerPublishVolume": gateOf(func(g *gateCheck, r *csi.ControllerPublishVolumeRequest) {
		g.invalid(r.GetReadonly(), "readonly", ControllerCap(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY))
		g.singleNodeMode("volume_capability", r.GetVolumeCapability(), controllerSingle)
	}),
	"/csi.v1.Node/NodeStageVolume": gateOf(func(g *gateCheck, r *csi.NodeStageVolumeRequest) {
		g.singleNodeMode("volume_capability", r.GetVolumeCapability(), nodeSingle)
	}),
	"/csi.v1.Node/NodePublishVolume": gateOf(func(g *gateCheck, r *csi.NodePublishVolumeRequest) {
		g.singleNodeMode("volume_capability", r.GetVolumeCapability(), nodeSingle)
		if r.GetStagingTargetPath() == "" {
			if has, _ := g.caps.has(nodeStage.Kind, nodeStage.Cap); has {
				g.out = append(g.out, Violation{codes.FailedPrecondition, fmt.Sprintf(
					"staging_target_path is required: backend %q advertises the %s; call NodeStageVolume first and pass its staging_target_path",
					g.caps.backend, nodeStage)})
			}
		}
	}),
}

// gateRequest checks the rules of a request that depend on what the backend advertises.
func gateRequest(method string, req proto.Message, caps backendCaps) []Violation {
	gate := requestGates[method]
	if gate == nil {
		return nil
	}
	g := gateCheck{caps: caps}
	gate(&g, req)
	return g.out
}

// singleNodeMode reports whether vc asks for SINGLE_NODE_SINGLE_WRITER or
// SINGLE_NODE_MULTI_WRITER, which a plugin serves only with the SINGLE_NODE_MULTI_WRITER
// capability.
func singleNodeMode(vc *csi.VolumeCapability) bool {
	m := vc.GetAccessMode().GetMode()
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER || m == csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
}
