package proxy

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// validationCase is one request rule: method and request, and the code and message fragment
// the caller gets (codes.OK: forwarded).
type validationCase struct {
	name     string
	method   string
	req      proto.Message
	code     codes.Code
	fragment string
}

func requestRuleCases() []validationCase {
	const cv = "/csi.v1.Controller/CreateVolume"
	long := strings.Repeat("x", 129)
	return []validationCase{
		// REQUIRED fields.
		{"name missing", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.Name = "" }), codes.InvalidArgument, "invalid CreateVolume request: name is required"},
		{"volume_capabilities empty", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = nil }), codes.InvalidArgument, "volume_capabilities is required"},
		{"access_mode missing", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].AccessMode = nil }), codes.InvalidArgument, "volume_capabilities[0].access_mode is required"},
		{"access mode UNKNOWN", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = append(r.VolumeCapabilities, valMountCap(csi.VolumeCapability_AccessMode_UNKNOWN))
		}), codes.InvalidArgument, "volume_capabilities[1].access_mode.mode is required"},
		{"access type missing", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].AccessType = nil }), codes.InvalidArgument, "volume_capabilities[0].access_type is required: set block or mount"},
		{"block access type", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities[0].AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		}), codes.OK, ""},
		{"DeleteVolume without volume_id", "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{}, codes.InvalidArgument, "volume_id is required"},
		{"ControllerPublish without node_id and capability", "/csi.v1.Controller/ControllerPublishVolume", &csi.ControllerPublishVolumeRequest{VolumeId: "v"},
			codes.InvalidArgument, "node_id is required; volume_capability is required"},
		{"ControllerUnpublish without node_id", "/csi.v1.Controller/ControllerUnpublishVolume", &csi.ControllerUnpublishVolumeRequest{VolumeId: "v"}, codes.OK, ""},
		{"Validate without capabilities", "/csi.v1.Controller/ValidateVolumeCapabilities", &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v"}, codes.InvalidArgument, "volume_capabilities is required"},
		{"CreateSnapshot without source", "/csi.v1.Controller/CreateSnapshot", &csi.CreateSnapshotRequest{Name: "s"}, codes.InvalidArgument, "source_volume_id is required"},
		{"ControllerExpand without capacity_range", "/csi.v1.Controller/ControllerExpandVolume", &csi.ControllerExpandVolumeRequest{VolumeId: "v"}, codes.InvalidArgument, "capacity_range is required"},
		{"ControllerModify without mutable_parameters", "/csi.v1.Controller/ControllerModifyVolume", &csi.ControllerModifyVolumeRequest{VolumeId: "v"}, codes.InvalidArgument, "mutable_parameters is required"},
		{"NodeStage without path", "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "v", VolumeCapability: valWriter()}, codes.InvalidArgument, "staging_target_path is required"},
		{"NodePublish without target", "/csi.v1.Node/NodePublishVolume", &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: valWriter()}, codes.InvalidArgument, "target_path is required"},
		{"NodeGetVolumeStats without path", "/csi.v1.Node/NodeGetVolumeStats", &csi.NodeGetVolumeStatsRequest{VolumeId: "v"}, codes.InvalidArgument, "volume_path is required"},
		{"delete group snapshot without snapshot_ids", "/csi.v1.GroupController/DeleteVolumeGroupSnapshot", &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g"}, codes.OK, ""},
		{"group snapshot without sources", "/csi.v1.GroupController/CreateVolumeGroupSnapshot", &csi.CreateVolumeGroupSnapshotRequest{Name: "g"}, codes.InvalidArgument, "source_volume_ids is required"},
		{"volume group without name", "/volumegroup.Controller/CreateVolumeGroup", &volumegroup.CreateVolumeGroupRequest{}, codes.InvalidArgument, "name is required"},
		{"modify group without id", "/volumegroup.Controller/ModifyVolumeGroupMembership", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeIds: []string{"v"}}, codes.InvalidArgument, "volume_group_id is required"},
		{"metadata delta without target", "/csi.v1.SnapshotMetadata/GetMetadataDelta", &csi.GetMetadataDeltaRequest{BaseSnapshotId: "a"}, codes.InvalidArgument, "target_snapshot_id is required"},

		// Sizes.
		{"name of 129 bytes", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.Name = long }), codes.InvalidArgument, "name is 129 bytes long; CSI allows at most 128"},
		{"name of 128 bytes", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.Name = long[:128] }), codes.OK, ""},
		{"volume_id of 129 bytes", "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: long}, codes.InvalidArgument, "volume_id is 129 bytes long"},
		{"node_id of 257 bytes", "/csi.v1.Controller/ControllerPublishVolume", &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: strings.Repeat("n", 257), VolumeCapability: valWriter()},
			codes.InvalidArgument, "node_id is 257 bytes long; CSI allows at most 256"},
		{"parameters over 4 KiB", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.Parameters = map[string]string{"k": strings.Repeat("v", 4096)} }),
			codes.InvalidArgument, "parameters holds 4097 bytes (keys and values); CSI allows at most 4096"},
		{"volume_context over 4 KiB", "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: valWriter(),
			VolumeContext: map[string]string{"a": strings.Repeat("v", 2048), "b": strings.Repeat("v", 2048)}}, codes.InvalidArgument, "volume_context holds 4098 bytes"},
		{"secrets over 4 KiB pass", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.Secrets = map[string]string{"ca.crt": strings.Repeat("v", 8192)} }), codes.OK, ""},
		{"mount flag longer than 128 bytes", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0] = valWriter(strings.Repeat("o", 200)) }), codes.OK, ""},
		{"mount_flags over 4 KiB", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities[0] = valWriter(strings.Repeat("o", 2048), strings.Repeat("p", 2049))
		}), codes.InvalidArgument, "volume_capabilities[0].mount.mount_flags hold 4097 bytes together; CSI allows at most 4096"},
		{"path of 300 bytes", "/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: "/" + strings.Repeat("p", 299)}, codes.OK, ""},
		{"path over PATH_MAX", "/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: "/" + strings.Repeat("p", 4096)},
			codes.InvalidArgument, "target_path is 4097 bytes long; CSI allows at most 4096"},
		{"starting_token of 129 bytes", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{StartingToken: long}, codes.InvalidArgument, "starting_token is 129 bytes long"},
		{"fs_type of 129 bytes", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].GetMount().FsType = long }), codes.InvalidArgument, "volume_capabilities[0].mount.fs_type is 129 bytes long"},

		// Names.
		{"name with U+0001", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.Name = "pvc\x01" }), codes.InvalidArgument, "name contains the control character U+0001, which CSI forbids in names"},
		{"name with U+0085", "/csi.v1.Controller/CreateSnapshot", &csi.CreateSnapshotRequest{SourceVolumeId: "v", Name: "snap\u0085"}, codes.InvalidArgument, "name contains the control character U+0085"},
		{"name with U+001F", "/csi.v1.GroupController/CreateVolumeGroupSnapshot", &csi.CreateVolumeGroupSnapshotRequest{Name: "g\x1f", SourceVolumeIds: []string{"v"}}, codes.InvalidArgument, "U+001F"},
		{"name with tab, newline and unicode", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.Name = "pvc\t\n\r-ボリューム" }), codes.OK, ""},

		// Numbers.
		{"negative required_bytes", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.CapacityRange = &csi.CapacityRange{RequiredBytes: -1} }),
			codes.InvalidArgument, "capacity_range.required_bytes must not be negative"},
		{"negative limit_bytes", "/csi.v1.Controller/ControllerExpandVolume", &csi.ControllerExpandVolumeRequest{VolumeId: "v", CapacityRange: &csi.CapacityRange{RequiredBytes: 5, LimitBytes: -5}},
			codes.InvalidArgument, "capacity_range.limit_bytes must not be negative"},
		{"limit below required", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.CapacityRange = &csi.CapacityRange{RequiredBytes: 10, LimitBytes: 5}
		}),
			codes.InvalidArgument, "capacity_range.limit_bytes is 5, less than capacity_range.required_bytes (10)"},
		{"limit equal to required", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.CapacityRange = &csi.CapacityRange{RequiredBytes: 10, LimitBytes: 10}
		}), codes.OK, ""},
		{"empty capacity_range", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.CapacityRange = &csi.CapacityRange{} }),
			codes.InvalidArgument, "capacity_range must set required_bytes or limit_bytes"},
		{"negative max_entries", "/csi.v1.Controller/ListSnapshots", &csi.ListSnapshotsRequest{MaxEntries: -1}, codes.InvalidArgument, "max_entries must not be negative"},
		{"negative group max_entries", "/volumegroup.Controller/ListVolumeGroups", &volumegroup.ListVolumeGroupsRequest{MaxEntries: -3}, codes.InvalidArgument, "max_entries must not be negative"},
		{"negative starting_offset", "/csi.v1.SnapshotMetadata/GetMetadataAllocated", &csi.GetMetadataAllocatedRequest{SnapshotId: "s", StartingOffset: -1}, codes.InvalidArgument, "starting_offset must not be negative"},

		// Content source.
		{"content source without type", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.VolumeContentSource = &csi.VolumeContentSource{} }),
			codes.InvalidArgument, "volume_content_source must name a snapshot or a volume"},
		{"snapshot source without id", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{}}}
		}), codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id is required"},
		{"volume source without id", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{}}}
		}), codes.InvalidArgument, "volume_content_source.volume.volume_id is required"},
		{"volume source", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "v"}}}
		}), codes.OK, ""},

		// Topology.
		// Nomad 1.9 sends an empty requirement for a volume without topology_request: taken
		// for none, not refused.
		{"empty topology requirement", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) { r.AccessibilityRequirements = &csi.TopologyRequirement{} }),
			codes.OK, ""},
		{"preferred not requisite", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{valTopo("zone", "a")}, Preferred: []*csi.Topology{valTopo("zone", "b")}}
		}), codes.InvalidArgument, "accessibility_requirements.preferred[0] is not in accessibility_requirements.requisite"},
		{"preferred within requisite", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{valTopo("zone", "a", "rack", "r1"), valTopo("zone", "b")},
				Preferred: []*csi.Topology{valTopo("rack", "r1", "zone", "a")}}
		}), codes.OK, ""},
		{"preferred only", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Preferred: []*csi.Topology{valTopo("topology.kubernetes.io/zone", "us-east-1a")}}
		}), codes.OK, ""},
		{"topology key with upper-case prefix", cv, valCreateVolume(func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{valTopo("Example.com/zone", "a")}}
		}), codes.InvalidArgument, `accessibility_requirements.requisite[0].segments: key "Example.com/zone" has a prefix that is not a lower-case domain name`},
		{"topology key name with a space", "/csi.v1.Controller/GetCapacity", &csi.GetCapacityRequest{AccessibleTopology: valTopo("my zone", "a")},
			codes.InvalidArgument, `accessible_topology.segments: key "my zone" has a name that is not`},
		{"topology value too long", "/csi.v1.Controller/GetCapacity", &csi.GetCapacityRequest{AccessibleTopology: valTopo("zone", strings.Repeat("a", 64))},
			codes.InvalidArgument, `the value of key "zone" must be 1 to 63 characters`},
		{"topology empty value", "/csi.v1.Controller/GetCapacity", &csi.GetCapacityRequest{AccessibleTopology: valTopo("zone", "")},
			codes.InvalidArgument, `the value of key "zone"`},
		{"topology keys differing in case", "/csi.v1.Controller/GetCapacity", &csi.GetCapacityRequest{AccessibleTopology: valTopo("Zone", "a", "zone", "a")},
			codes.InvalidArgument, "differ only in case"},

		// Secrets and paths.
		{"secrets key with a slash", "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "v", Secrets: map[string]string{"a/b": "x"}},
			codes.InvalidArgument, "secrets has a key that is not made of alphanumerics, '-', '_' and '.'"},
		{"secrets empty key", "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: valWriter(), Secrets: map[string]string{"": "x"}},
			codes.InvalidArgument, "secrets has a key"},
		{"relative staging path", "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "staging/v", VolumeCapability: valWriter()},
			codes.InvalidArgument, "staging_target_path must be an absolute path"},
		{"relative target path", "/csi.v1.Node/NodePublishVolume", &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", TargetPath: "t", VolumeCapability: valWriter()},
			codes.InvalidArgument, "target_path must be an absolute path"},
		{"relative volume_path is the plugin's to judge", "/csi.v1.Node/NodeExpandVolume", &csi.NodeExpandVolumeRequest{VolumeId: "v", VolumePath: "some/path"}, codes.OK, ""},
		{"relative stats volume_path is the plugin's to judge", "/csi.v1.Node/NodeGetVolumeStats", &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: "some/path"}, codes.OK, ""},
		{"relative health path", "/csi.v1.Node/NodeGetVolumeHealth", &csi.NodeGetVolumeHealthRequest{VolumeId: "v", VolumePublishPath: "p"},
			codes.InvalidArgument, "volume_publish_path must be an absolute path"},
		{"relative optional staging path", "/csi.v1.Node/NodeGetVolumeStats", &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: "/v", StagingTargetPath: "s"},
			codes.InvalidArgument, "staging_target_path must be an absolute path"},

		// Several at once: the first three are named.
		{"several", cv, &csi.CreateVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: -1, LimitBytes: -2}, Parameters: map[string]string{"k": strings.Repeat("v", 5000)}},
			codes.InvalidArgument, "name is required; volume_capabilities is required; capacity_range.required_bytes must not be negative; and 2 more"},
	}
}

// TestValidateRequestRules: each request rule, through validate → canonicalize → dispatch in
// enforce mode: the code and message, and a refused request never reaches the backend.
func TestValidateRequestRules(t *testing.T) {
	for _, tc := range requestRuleCases() {
		t.Run(tc.name, func(t *testing.T) {
			fake := validationFake(valAllCaps(), nil)
			_, err := runValidated(t, validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler)), tc.method, tc.req)
			if tc.code == codes.OK && tc.method == "/csi.v1.Controller/CreateVolume" {
				// forwarded: the fake's empty answer is itself refused, as a malformed answer
				checkRefusal(t, err, codes.Unavailable, "volume is required")
			} else {
				checkRefusal(t, err, tc.code, tc.fragment)
			}
			want := []string{tc.method}
			if tc.code != codes.OK {
				want = nil
			}
			if got := valForwarded(fake); !slices.Equal(got, want) {
				t.Errorf("the backend got %v, want %v", got, want)
			}
		})
	}
}

// TestValidateUndecodableRequest: bytes that are not the method's request message are
// INVALID_ARGUMENT.
func TestValidateUndecodableRequest(t *testing.T) {
	fake := validationFake(valAllCaps(), nil)
	h := validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler))
	method := "/csi.v1.Controller/DeleteVolume"
	call := &Call{Method: method, Start: time.Now(), Request: []byte{0x0a, 0x05, 'a'}, info: lookupMethod(method)}
	checkRefusal(t, h(context.Background(), call), codes.InvalidArgument, "request is not a valid csi.v1.DeleteVolumeRequest")
	if got := valForwarded(fake); len(got) != 0 {
		t.Errorf("the backend got %v", got)
	}
}
