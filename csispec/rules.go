package csispec

import "google.golang.org/protobuf/reflect/protoreflect"

// The spec's size limits (REQUIREMENTS §3.4), in bytes unless said otherwise.
const (
	maxStringBytes     = 128     // every string field, unless overridden
	maxNodeIDBytes     = 256     // node_id (v1 override of the general limit)
	maxPathBytes       = 4096    // path fields: "the maximum path length allowed by the OS" (PATH_MAX)
	maxMapBytes        = 4 << 10 // every map<string, string>, keys and values counted
	maxMountFlagsBytes = 4 << 10 // MountVolume.mount_flags, all flags together
)

// requiredFields are the REQUIRED fields a proxy can check (REQUIREMENTS §3.5), by message: a
// string must be non-empty, a message present, a repeated or map field hold one element.
// REQUIRED scalars (readonly, ready_to_use, capacity_bytes, ...) are not listed: proto3 cannot
// tell a missing scalar from its default. The same table serves requests and answers: the
// checker walks every message it reaches, so Volume.volume_id is required wherever a Volume
// appears (CreateVolume, ListVolumes, ControllerGetVolume, VolumeGroup.volumes).
var requiredFields = map[protoreflect.FullName][]protoreflect.Name{
	// Requests.
	"csi.v1.CreateVolumeRequest":               {"name", "volume_capabilities"},
	"csi.v1.DeleteVolumeRequest":               {"volume_id"},
	"csi.v1.ControllerPublishVolumeRequest":    {"volume_id", "node_id", "volume_capability"},
	"csi.v1.ControllerUnpublishVolumeRequest":  {"volume_id"},
	"csi.v1.ValidateVolumeCapabilitiesRequest": {"volume_id", "volume_capabilities"},
	"csi.v1.ControllerGetVolumeRequest":        {"volume_id"},
	"csi.v1.ControllerModifyVolumeRequest":     {"volume_id", "mutable_parameters"},
	"csi.v1.ControllerGetVolumeHealthRequest":  {"volume_id"},
	"csi.v1.CreateSnapshotRequest":             {"source_volume_id", "name"},
	"csi.v1.DeleteSnapshotRequest":             {"snapshot_id"},
	"csi.v1.GetSnapshotRequest":                {"snapshot_id"},
	"csi.v1.ControllerExpandVolumeRequest":     {"volume_id", "capacity_range"},
	"csi.v1.NodeStageVolumeRequest":            {"volume_id", "staging_target_path", "volume_capability"},
	"csi.v1.NodeUnstageVolumeRequest":          {"volume_id", "staging_target_path"},
	"csi.v1.NodePublishVolumeRequest":          {"volume_id", "target_path", "volume_capability"},
	"csi.v1.NodeUnpublishVolumeRequest":        {"volume_id", "target_path"},
	"csi.v1.NodeGetVolumeStatsRequest":         {"volume_id", "volume_path"},
	"csi.v1.NodeGetVolumeHealthRequest":        {"volume_id"},
	"csi.v1.NodeExpandVolumeRequest":           {"volume_id", "volume_path"},
	"csi.v1.CreateVolumeGroupSnapshotRequest":  {"name", "source_volume_ids"},
	// snapshot_ids is REQUIRED by the spec too, but csi-sanity (the conformance suite) leaves
	// it out and expects NOT_FOUND, and OK for a delete: a plugin that needs it says so itself.
	"csi.v1.DeleteVolumeGroupSnapshotRequest": {"group_snapshot_id"},
	"csi.v1.GetVolumeGroupSnapshotRequest":    {"group_snapshot_id"},
	"csi.v1.GetMetadataAllocatedRequest":      {"snapshot_id"},
	"csi.v1.GetMetadataDeltaRequest":          {"base_snapshot_id", "target_snapshot_id"},

	"volumegroup.CreateVolumeGroupRequest":           {"name"},
	"volumegroup.DeleteVolumeGroupRequest":           {"volume_group_id"},
	"volumegroup.ModifyVolumeGroupMembershipRequest": {"volume_group_id"},
	"volumegroup.ControllerGetVolumeGroupRequest":    {"volume_group_id"},

	// Nested in requests.
	"csi.v1.VolumeCapability":                   {"access_mode"},
	"csi.v1.VolumeContentSource.SnapshotSource": {"snapshot_id"},
	"csi.v1.VolumeContentSource.VolumeSource":   {"volume_id"},

	// Answers.
	"csi.v1.GetPluginInfoResponse":                        {"name", "vendor_version"},
	"csi.v1.CreateVolumeResponse":                         {"volume"},
	"csi.v1.Volume":                                       {"volume_id"},
	"csi.v1.ValidateVolumeCapabilitiesResponse.Confirmed": {"volume_capabilities"},
	"csi.v1.ListVolumesResponse.Entry":                    {"volume"},
	"csi.v1.ControllerGetVolumeResponse":                  {"volume", "status"},
	"csi.v1.ControllerGetVolumeHealthResponse":            {"volume_health"},
	"csi.v1.NodeGetVolumeHealthResponse":                  {"volume_health"},
	"csi.v1.VolumeHealth":                                 {"volume_id"},
	"csi.v1.VolumeHealth.VolumeHealthEntry":               {"reason"},
	"csi.v1.CreateSnapshotResponse":                       {"snapshot"},
	"csi.v1.GetSnapshotResponse":                          {"snapshot"},
	"csi.v1.ListSnapshotsResponse.Entry":                  {"snapshot"},
	"csi.v1.Snapshot":                                     {"snapshot_id", "source_volume_id", "creation_time"},
	"csi.v1.NodeGetInfoResponse":                          {"node_id"},
	"csi.v1.CreateVolumeGroupSnapshotResponse":            {"group_snapshot"},
	"csi.v1.GetVolumeGroupSnapshotResponse":               {"group_snapshot"},
	"csi.v1.VolumeGroupSnapshot":                          {"group_snapshot_id", "snapshots", "creation_time"},

	"volumegroup.CreateVolumeGroupResponse":           {"volume_group"},
	"volumegroup.ModifyVolumeGroupMembershipResponse": {"volume_group"},
	"volumegroup.ControllerGetVolumeGroupResponse":    {"volume_group"},
	"volumegroup.ListVolumeGroupsResponse.Entry":      {"volume_group"},
	"volumegroup.VolumeGroup":                         {"volume_group_id"},
}

// pathFields are the node path fields: exempt from the 128-byte limit (v1 overrides it: "SP
// SHOULD support the maximum path length allowed by the operating system"), bounded by
// PATH_MAX instead, and absolute unless listed in relativeTolerated.
var pathFields = setOf[protoreflect.FullName](
	"csi.v1.NodeStageVolumeRequest.staging_target_path",
	"csi.v1.NodeUnstageVolumeRequest.staging_target_path",
	"csi.v1.NodePublishVolumeRequest.staging_target_path",
	"csi.v1.NodePublishVolumeRequest.target_path",
	"csi.v1.NodeUnpublishVolumeRequest.target_path",
	"csi.v1.NodeGetVolumeStatsRequest.volume_path",
	"csi.v1.NodeGetVolumeStatsRequest.staging_target_path",
	"csi.v1.NodeExpandVolumeRequest.volume_path",
	"csi.v1.NodeExpandVolumeRequest.staging_target_path",
	"csi.v1.NodeGetVolumeHealthRequest.volume_publish_path",
	"csi.v1.NodeGetVolumeHealthRequest.staging_target_path",
)

// relativeTolerated are path fields a relative path is passed on in, for the plugin to judge:
// csi-sanity sends volume_path "some/path" to NodeGetVolumeStats and NodeExpandVolume and
// expects the plugin's NOT_FOUND ("volume does not exist on the specified path"); kubelet
// always sends absolute paths.
var relativeTolerated = setOf[protoreflect.FullName](
	"csi.v1.NodeGetVolumeStatsRequest.volume_path",
	"csi.v1.NodeExpandVolumeRequest.volume_path",
)

// nodeIDFields hold a node_id as NodeGetInfo returns it: at most 256 bytes.
var nodeIDFields = setOf[protoreflect.FullName](
	"csi.v1.NodeGetInfoResponse.node_id",
	"csi.v1.ControllerPublishVolumeRequest.node_id",
	"csi.v1.ControllerUnpublishVolumeRequest.node_id",
	"csi.v1.ListVolumesResponse.VolumeStatus.published_node_ids",
	"csi.v1.ControllerGetVolumeResponse.VolumeStatus.published_node_ids",
)

// coNames are the CO-generated names that must not hold the control characters the spec bans.
var coNames = setOf[protoreflect.FullName](
	"csi.v1.CreateVolumeRequest.name",
	"csi.v1.CreateSnapshotRequest.name",
	"csi.v1.CreateVolumeGroupSnapshotRequest.name",
)

// nonNegative are the numbers that MUST NOT be negative (REQUIREMENTS §3.5), plain or wrapped
// in google.protobuf.Int64Value.
var nonNegative = setOf[protoreflect.FullName](
	"csi.v1.CapacityRange.required_bytes",
	"csi.v1.CapacityRange.limit_bytes",
	"csi.v1.Volume.capacity_bytes",
	"csi.v1.GetCapacityResponse.available_capacity",
	"csi.v1.GetCapacityResponse.maximum_volume_size",
	"csi.v1.GetCapacityResponse.minimum_volume_size",
	"csi.v1.Snapshot.size_bytes",
	"csi.v1.VolumeUsage.available",
	"csi.v1.VolumeUsage.total",
	"csi.v1.VolumeUsage.used",
	"csi.v1.NodeGetInfoResponse.max_volumes_per_node",
	"csi.v1.ControllerExpandVolumeResponse.capacity_bytes",
	"csi.v1.NodeExpandVolumeResponse.capacity_bytes",
	"csi.v1.ListVolumesRequest.max_entries",
	"csi.v1.ListSnapshotsRequest.max_entries",
	"csi.v1.ControllerListVolumeHealthRequest.max_entries",
	"volumegroup.ListVolumeGroupsRequest.max_entries",
	"csi.v1.GetMetadataAllocatedRequest.starting_offset",
	"csi.v1.GetMetadataAllocatedRequest.max_results",
	"csi.v1.GetMetadataDeltaRequest.starting_offset",
	"csi.v1.GetMetadataDeltaRequest.max_results",
)

const mountFlagsField protoreflect.FullName = "csi.v1.VolumeCapability.MountVolume.mount_flags"

func setOf[T comparable](items ...T) map[T]bool {
	m := make(map[T]bool, len(items))
	for _, it := range items {
		m[it] = true
	}
	return m
}
