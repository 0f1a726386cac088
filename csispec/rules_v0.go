package csispec

import (
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// CSI v0's rows of the rule tables (proto package csi.v0: v0.2 as the seed spec gives it, and
// v0.3's additions; internal/csiv0), added at init to the same tables v1's rules live in and
// checked by the same engine. Where v0's rules are v1's, the row is v1's under v0's names
// (v0's Volume has "id", not "volume_id"); where v0 differs, the row says so.
//
// Not carried over: v1's request gates that depend on capabilities (topology, readonly,
// content sources, NodePublish's staging path), its answer rules (capacity and topology of a
// created volume) and its VolumeCapability format checks.
var (
	// v0MethodGates are the RPCs a v0 plugin implements only with a capability, read from v0's
	// own capability RPCs (V0ControllerCaps, V0NodeCaps).
	v0MethodGates = map[string]CapRef{
		"/csi.v0.Controller/CreateVolume":              v0ControllerCap(csiv0.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		"/csi.v0.Controller/DeleteVolume":              v0ControllerCap(csiv0.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		"/csi.v0.Controller/ControllerPublishVolume":   v0ControllerCap(csiv0.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME),
		"/csi.v0.Controller/ControllerUnpublishVolume": v0ControllerCap(csiv0.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME),
		"/csi.v0.Controller/ListVolumes":               v0ControllerCap(csiv0.ControllerServiceCapability_RPC_LIST_VOLUMES),
		"/csi.v0.Controller/GetCapacity":               v0ControllerCap(csiv0.ControllerServiceCapability_RPC_GET_CAPACITY),
		"/csi.v0.Controller/CreateSnapshot":            v0ControllerCap(csiv0.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
		"/csi.v0.Controller/DeleteSnapshot":            v0ControllerCap(csiv0.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
		"/csi.v0.Controller/ListSnapshots":             v0ControllerCap(csiv0.ControllerServiceCapability_RPC_LIST_SNAPSHOTS),
		"/csi.v0.Node/NodeStageVolume":                 {V0NodeCaps, int32(csiv0.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)},
		"/csi.v0.Node/NodeUnstageVolume":               {V0NodeCaps, int32(csiv0.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)},
	}

	v0RequiredFields = map[protoreflect.FullName][]protoreflect.Name{
		// Requests.
		"csi.v0.CreateVolumeRequest":               {"name", "volume_capabilities"},
		"csi.v0.DeleteVolumeRequest":               {"volume_id"},
		"csi.v0.ControllerPublishVolumeRequest":    {"volume_id", "node_id", "volume_capability"},
		"csi.v0.ControllerUnpublishVolumeRequest":  {"volume_id"},
		"csi.v0.ValidateVolumeCapabilitiesRequest": {"volume_id", "volume_capabilities"},
		"csi.v0.CreateSnapshotRequest":             {"source_volume_id", "name"},
		"csi.v0.DeleteSnapshotRequest":             {"snapshot_id"},
		"csi.v0.NodeStageVolumeRequest":            {"volume_id", "staging_target_path", "volume_capability"},
		"csi.v0.NodeUnstageVolumeRequest":          {"volume_id", "staging_target_path"},
		"csi.v0.NodePublishVolumeRequest":          {"volume_id", "target_path", "volume_capability"},
		"csi.v0.NodeUnpublishVolumeRequest":        {"volume_id", "target_path"},
		// Nested in requests.
		"csi.v0.VolumeCapability":                   {"access_mode"},
		"csi.v0.VolumeContentSource.SnapshotSource": {"id"},
		// Answers.
		"csi.v0.GetPluginInfoResponse":       {"name", "vendor_version"},
		"csi.v0.CreateVolumeResponse":        {"volume"},
		"csi.v0.Volume":                      {"id"},
		"csi.v0.ListVolumesResponse.Entry":   {"volume"},
		"csi.v0.CreateSnapshotResponse":      {"snapshot"},
		"csi.v0.ListSnapshotsResponse.Entry": {"snapshot"},
		"csi.v0.Snapshot":                    {"id", "source_volume_id"},
		"csi.v0.NodeGetIdResponse":           {"node_id"},
		"csi.v0.NodeGetInfoResponse":         {"node_id"},
	}

	// v0PathFields: v0's general limit is 128 bytes for every string, paths included, which a
	// kubelet's target paths outgrow; v1 lifted it for paths ("the maximum path length allowed
	// by the operating system"), and v0 paths are bounded the same way, or a v0 driver would be
	// refused calls it has always been sent.
	v0PathFields = []protoreflect.FullName{
		"csi.v0.NodeStageVolumeRequest.staging_target_path",
		"csi.v0.NodeUnstageVolumeRequest.staging_target_path",
		"csi.v0.NodePublishVolumeRequest.staging_target_path",
		"csi.v0.NodePublishVolumeRequest.target_path",
		"csi.v0.NodeUnpublishVolumeRequest.target_path",
	}

	v0CONames = []protoreflect.FullName{
		"csi.v0.CreateVolumeRequest.name",
		"csi.v0.CreateSnapshotRequest.name",
	}

	v0NonNegative = []protoreflect.FullName{
		"csi.v0.CapacityRange.required_bytes",
		"csi.v0.CapacityRange.limit_bytes",
		"csi.v0.Volume.capacity_bytes",
		"csi.v0.GetCapacityResponse.available_capacity",
		"csi.v0.Snapshot.size_bytes",
		"csi.v0.NodeGetInfoResponse.max_volumes_per_node",
		"csi.v0.ListVolumesRequest.max_entries",
		"csi.v0.ListSnapshotsRequest.max_entries",
	}

	v0CreateMethods = []string{"/csi.v0.Controller/CreateVolume", "/csi.v0.Controller/CreateSnapshot"}

	// v0ErrorRules are v0's own rows of the error table (docs/errors.md lists them apart);
	// Probe's rows serve both versions (errorRules).
	v0ErrorRules = []errorRule{
		{
			methods: []string{"/csi.v0.Controller/DeleteVolume", "/csi.v0.Controller/DeleteSnapshot"},
			class:   backends.ClassNotFound, code: codes.OK, required: true,
			why: "v0 too: deleting an object that does not exist MUST succeed (v0.2 §DeleteVolume, v0.3 §DeleteSnapshot)",
		},
		{
			methods: []string{"/csi.v0.Controller/ControllerUnpublishVolume", "/csi.v0.Node/NodeUnstageVolume",
				"/csi.v0.Node/NodeUnpublishVolume"},
			class: backends.ClassNotFound, code: codes.NotFound,
			why: "unlike v1, v0's error tables give NOT_FOUND for a volume (or node) that does not exist, and a v0 CO expects it: it stays NOT_FOUND",
		},
	}
)

func v0ControllerCap(t csiv0.ControllerServiceCapability_RPC_Type) CapRef {
	return CapRef{V0ControllerCaps, int32(t)}
}

func init() {
	maps.Copy(methodGates, v0MethodGates)
	maps.Copy(requiredFields, v0RequiredFields)
	for _, f := range v0PathFields {
		pathFields[f] = true
	}
	for _, f := range v0CONames {
		coNames[f] = true
	}
	for _, f := range v0NonNegative {
		nonNegative[f] = true
	}
	for _, m := range v0CreateMethods {
		createMethods[m] = true
	}
	errorRules = append(errorRules, v0ErrorRules...)
}
