package proxy

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-gateway/csi-gateway/csispec"
)

// responseCase is one answer rule: the backend answers req with resp, and the caller gets
// code with fragment in its message (codes.OK: the answer, unchanged).
type responseCase struct {
	name     string
	method   string
	req      proto.Message // nil: validRequests[method]
	resp     proto.Message
	caps     *fakeCaps // nil: valAllCaps()
	code     codes.Code
	fragment string
}

func valVolume(edit func(v *csi.Volume)) *csi.Volume {
	v := &csi.Volume{VolumeId: "vol-1", CapacityBytes: 1 << 30}
	if edit != nil {
		edit(v)
	}
	return v
}

func valSnapshot(edit func(s *csi.Snapshot)) *csi.Snapshot {
	s := &csi.Snapshot{SnapshotId: "snap-1", SourceVolumeId: "vol-1", CreationTime: timestamppb.New(time.Unix(1700000000, 0)), ReadyToUse: true}
	if edit != nil {
		edit(s)
	}
	return s
}

func valVolumeEntries(n int) []*csi.ListVolumesResponse_Entry {
	var out []*csi.ListVolumesResponse_Entry
	for range n {
		out = append(out, &csi.ListVolumesResponse_Entry{Volume: valVolume(nil), Status: &csi.ListVolumesResponse_VolumeStatus{}})
	}
	return out
}

// requisite is a valid CreateVolume whose accessibility_requirements lists ts as requisite.
func requisite(ts ...*csi.Topology) *csi.CreateVolumeRequest {
	return valCreateVolume(func(r *csi.CreateVolumeRequest) {
		r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: ts}
	})
}

func responseRuleCases() []responseCase {
	const (
		cv = "/csi.v1.Controller/CreateVolume"
		cs = "/csi.v1.Controller/CreateSnapshot"
		pi = "/csi.v1.Identity/GetPluginInfo"
		lv = "/csi.v1.Controller/ListVolumes"
		ni = "/csi.v1.Node/NodeGetInfo"
	)
	long := strings.Repeat("x", 129)
	noTopology := valAllCaps().without(csispec.PluginCap(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS))
	return []responseCase{
		{name: "CreateVolume valid", method: cv, resp: &csi.CreateVolumeResponse{Volume: valVolume(nil)}},
		{name: "CreateVolume empty answer", method: cv, resp: &csi.CreateVolumeResponse{}, code: codes.Unavailable,
			fragment: `backend "fake": malformed CreateVolume answer: volume is required; the gateway does not pass on a malformed answer: retry with the same name`},
		{name: "CreateVolume without volume_id", method: cv, resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.VolumeId = "" })},
			code: codes.Unavailable, fragment: "volume.volume_id is required"},
		{name: "CreateVolume volume_id too long", method: cv, resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.VolumeId = long })},
			code: codes.Unavailable, fragment: "volume.volume_id is 129 bytes long; CSI allows at most 128"},
		{name: "CreateVolume volume_context over 4 KiB", method: cv, resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) {
			v.VolumeContext = map[string]string{"k": strings.Repeat("v", 4100)}
		})}, code: codes.Unavailable, fragment: "volume.volume_context holds 4101 bytes"},
		{name: "CreateVolume negative capacity", method: cv, resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.CapacityBytes = -1 })},
			code: codes.Unavailable, fragment: "volume.capacity_bytes must not be negative"},
		{name: "CreateVolume smaller than required", method: cv, resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.CapacityBytes = 1 << 20 })},
			code: codes.AlreadyExists, fragment: `backend "fake": the CreateVolume answer does not match the request: volume.capacity_bytes is 1048576, less than the required_bytes 1073741824 asked for; ` +
				"an object of this name exists and is not the one asked for: use another name, or the arguments it was created with"},
		{name: "CreateVolume larger than limit", method: cv,
			req:  valCreateVolume(func(r *csi.CreateVolumeRequest) { r.CapacityRange = &csi.CapacityRange{LimitBytes: 1 << 20} }),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(nil)}, code: codes.AlreadyExists, fragment: "more than the limit_bytes 1048576 asked for"},
		{name: "CreateVolume malformed and too small: malformed wins", method: cv,
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.CapacityBytes, v.VolumeId = 1<<20, "" })},
			code: codes.Unavailable, fragment: "volume.volume_id is required; volume.capacity_bytes is 1048576, less than the required_bytes"},
		{name: "CreateVolume within requisite", method: cv, req: requisite(valTopo("zone", "z1"), valTopo("zone", "z2")),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "z2")} })}},
		{name: "CreateVolume outside requisite", method: cv, req: requisite(valTopo("zone", "z1")),
			resp:     &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "z9")} })},
			code:     codes.AlreadyExists,
			fragment: `volume.accessible_topology {"zone"="z9"} is outside accessibility_requirements.requisite {"zone"="z1"}: the volume must be accessible from at least one requisite topology`},
		{name: "CreateVolume in several topologies, one requisite", method: cv, req: requisite(valTopo("zone", "z1")),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) {
				v.AccessibleTopology = []*csi.Topology{valTopo("zone", "z9"), valTopo("zone", "z1")}
			})}},
		{name: "CreateVolume in a rack of the zone", method: cv, req: requisite(valTopo("zone", "z1")),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "z1", "rack", "r3")} })}},
		{name: "CreateVolume region-wide for a zone", method: cv, req: requisite(valTopo("region", "r1", "zone", "z1")),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("region", "r1")} })}},
		{name: "CreateVolume in another region", method: cv, req: requisite(valTopo("region", "r1", "zone", "z1")),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("region", "r2")} })},
			code: codes.AlreadyExists, fragment: `{"region"="r2"} is outside`},
		{name: "CreateVolume topology keys differ in case", method: cv, req: requisite(valTopo("Zone", "z1")),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "z2")} })},
			code: codes.AlreadyExists, fragment: "is outside accessibility_requirements.requisite"},
		{name: "CreateVolume without topology, requisite given", method: cv, req: requisite(valTopo("zone", "z1")), resp: &csi.CreateVolumeResponse{Volume: valVolume(nil)}},
		{name: "CreateVolume from a snapshot, outside requisite", method: cv, req: func() proto.Message {
			r := requisite(valTopo("zone", "z1"))
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}}
			return r
		}(), resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "z9")} })},
			code: codes.AlreadyExists, fragment: "outside accessibility_requirements.requisite"},
		{name: "CreateVolume preferred only imposes nothing", method: cv,
			req: valCreateVolume(func(r *csi.CreateVolumeRequest) {
				r.AccessibilityRequirements = &csi.TopologyRequirement{Preferred: []*csi.Topology{valTopo("zone", "z1")}}
			}),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "z9")} })}},
		{name: "CreateVolume outside many requisite topologies", method: cv, req: requisite(valTopo("zone", "z1"), valTopo("zone", "z2"), valTopo("zone", "z3"), valTopo("zone", "z4"), valTopo("zone", "z5")),
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "z9")} })},
			code: codes.AlreadyExists, fragment: `{"zone"="z1"} {"zone"="z2"} {"zone"="z3"} and 2 more`},
		{name: "CreateVolume capacity unknown", method: cv, resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.CapacityBytes = 0 })}},
		{name: "CreateVolume topology without the capability", method: cv, caps: noTopology,
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "a")} })},
			code: codes.Unavailable, fragment: "volume.accessible_topology is set but the backend does not advertise the plugin capability VOLUME_ACCESSIBILITY_CONSTRAINTS"},
		{name: "CreateVolume malformed topology", method: cv,
			resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) { v.AccessibleTopology = []*csi.Topology{valTopo("zone", "a b")} })},
			code: codes.Unavailable, fragment: `volume.accessible_topology[0].segments: the value of key "zone"`},
		{name: "CreateVolume content source without id", method: cv, resp: &csi.CreateVolumeResponse{Volume: valVolume(func(v *csi.Volume) {
			v.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{}}}
		})}, code: codes.Unavailable, fragment: "volume.content_source.snapshot.snapshot_id is required"},

		{name: "CreateSnapshot valid, not ready", method: cs, resp: &csi.CreateSnapshotResponse{Snapshot: valSnapshot(func(s *csi.Snapshot) { s.ReadyToUse = false })}},
		{name: "CreateSnapshot without creation_time", method: cs, resp: &csi.CreateSnapshotResponse{Snapshot: valSnapshot(func(s *csi.Snapshot) { s.CreationTime = nil })},
			code: codes.Unavailable, fragment: "snapshot.creation_time is required"},
		{name: "CreateSnapshot without ids", method: cs, resp: &csi.CreateSnapshotResponse{Snapshot: valSnapshot(func(s *csi.Snapshot) { s.SnapshotId, s.SourceVolumeId = "", "" })},
			code: codes.Unavailable, fragment: "snapshot.snapshot_id is required; snapshot.source_volume_id is required"},
		{name: "CreateSnapshot negative size", method: cs, resp: &csi.CreateSnapshotResponse{Snapshot: valSnapshot(func(s *csi.Snapshot) { s.SizeBytes = -10 })},
			code: codes.Unavailable, fragment: "snapshot.size_bytes must not be negative"},
		{name: "CreateSnapshot of another volume", method: cs, resp: &csi.CreateSnapshotResponse{Snapshot: valSnapshot(func(s *csi.Snapshot) { s.SourceVolumeId = "vol-2" })},
			code: codes.AlreadyExists, fragment: "the CreateSnapshot answer does not match the request: snapshot.source_volume_id is not the source_volume_id asked for"},
		{name: "GetSnapshot without snapshot", method: "/csi.v1.Controller/GetSnapshot", resp: &csi.GetSnapshotResponse{}, code: codes.Internal, fragment: "snapshot is required"},

		{name: "GetPluginInfo valid", method: pi, resp: &csi.GetPluginInfoResponse{Name: "csi.example.com", VendorVersion: "1.0.0"}},
		{name: "GetPluginInfo without name", method: pi, resp: &csi.GetPluginInfoResponse{VendorVersion: "1"}, code: codes.Internal,
			fragment: `backend "fake": malformed GetPluginInfo answer: name is required; the gateway does not pass on a malformed answer: fix the backend`},
		{name: "GetPluginInfo without vendor_version", method: pi, resp: &csi.GetPluginInfoResponse{Name: "csi.example.com"}, code: codes.Internal, fragment: "vendor_version is required"},
		{name: "plugin name of 64 characters", method: pi, resp: &csi.GetPluginInfoResponse{Name: strings.Repeat("a", 64), VendorVersion: "1"},
			code: codes.Internal, fragment: "name is not a plugin name: at most 63 characters"},
		{name: "plugin name with underscore", method: pi, resp: &csi.GetPluginInfoResponse{Name: "csi_example.com", VendorVersion: "1"}, code: codes.Internal, fragment: "name is not a plugin name"},
		{name: "plugin name ending in a dot", method: pi, resp: &csi.GetPluginInfoResponse{Name: "csi.example.", VendorVersion: "1"}, code: codes.Internal, fragment: "name is not a plugin name"},

		{name: "confirmed without capabilities", method: "/csi.v1.Controller/ValidateVolumeCapabilities",
			resp: &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{}},
			code: codes.Internal, fragment: "confirmed.volume_capabilities is required"},
		{name: "not confirmed, long message", method: "/csi.v1.Controller/ValidateVolumeCapabilities",
			resp: &csi.ValidateVolumeCapabilitiesResponse{Message: strings.Repeat("m", 300)}},

		{name: "ListVolumes within max_entries", method: lv, req: &csi.ListVolumesRequest{MaxEntries: 2}, resp: &csi.ListVolumesResponse{Entries: valVolumeEntries(2), NextToken: "t"}},
		{name: "ListVolumes over max_entries", method: lv, req: &csi.ListVolumesRequest{MaxEntries: 2}, resp: &csi.ListVolumesResponse{Entries: valVolumeEntries(3)},
			code: codes.Internal, fragment: "entries holds 3 entries, more than the max_entries 2 asked for"},
		{name: "ListVolumes unlimited", method: lv, req: &csi.ListVolumesRequest{}, resp: &csi.ListVolumesResponse{Entries: valVolumeEntries(5)}},
		{name: "ListVolumes entry without volume", method: lv, resp: &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{}}},
			code: codes.Internal, fragment: "entries[0].volume is required"},
		{name: "ListVolumes entry without status", method: lv, resp: &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: valVolume(nil)}}},
			code: codes.Internal, fragment: "entries[0].status is required: the backend advertises the controller capability LIST_VOLUMES_PUBLISHED_NODES"},
		{name: "ListVolumes entry without status, no published nodes", method: lv,
			caps: valAllCaps().without(csispec.ControllerCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES)),
			resp: &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: valVolume(nil)}}}},
		{name: "ListVolumes published node id too long", method: lv, resp: &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: valVolume(nil),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: []string{"n1", strings.Repeat("n", 257)}}}}},
			code: codes.Internal, fragment: "entries[0].status.published_node_ids[1] is 257 bytes long; CSI allows at most 256"},
		{name: "ListVolumes next_token too long", method: lv, resp: &csi.ListVolumesResponse{NextToken: long}, code: codes.Internal, fragment: "next_token is 129 bytes long"},
		{name: "ListSnapshots over max_entries", method: "/csi.v1.Controller/ListSnapshots", req: &csi.ListSnapshotsRequest{MaxEntries: 1},
			resp: &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: valSnapshot(nil)}, {Snapshot: valSnapshot(nil)}}},
			code: codes.Internal, fragment: "entries holds 2 entries, more than the max_entries 1"},
		{name: "ListVolumeGroups over max_entries", method: "/volumegroup.Controller/ListVolumeGroups", req: &volumegroup.ListVolumeGroupsRequest{MaxEntries: 1},
			resp: &volumegroup.ListVolumeGroupsResponse{Entries: []*volumegroup.ListVolumeGroupsResponse_Entry{
				{VolumeGroup: &volumegroup.VolumeGroup{VolumeGroupId: "a"}}, {VolumeGroup: &volumegroup.VolumeGroup{VolumeGroupId: "b"}}}},
			code: codes.Internal, fragment: "more than the max_entries 1"},

		{name: "ControllerGetVolume without status", method: "/csi.v1.Controller/ControllerGetVolume", resp: &csi.ControllerGetVolumeResponse{Volume: valVolume(nil)},
			code: codes.Internal, fragment: "status is required"},
		{name: "GetCapacity negative", method: "/csi.v1.Controller/GetCapacity", resp: &csi.GetCapacityResponse{AvailableCapacity: -1},
			code: codes.Internal, fragment: "available_capacity must not be negative"},
		{name: "GetCapacity negative maximum", method: "/csi.v1.Controller/GetCapacity", resp: &csi.GetCapacityResponse{MaximumVolumeSize: wrapperspb.Int64(-1)},
			code: codes.Internal, fragment: "maximum_volume_size must not be negative"},
		{name: "ControllerExpand less than asked", method: "/csi.v1.Controller/ControllerExpandVolume",
			req:  &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 30}},
			resp: &csi.ControllerExpandVolumeResponse{CapacityBytes: 4 << 30}, code: codes.Internal,
			fragment: `backend "fake": malformed ControllerExpandVolume answer: capacity_bytes is 4294967296, less than the required_bytes 8589934592 asked for; the gateway does not pass on a malformed answer: fix the backend`},
		{name: "ControllerExpand as asked", method: "/csi.v1.Controller/ControllerExpandVolume",
			req:  &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 30}},
			resp: &csi.ControllerExpandVolumeResponse{CapacityBytes: 8 << 30, NodeExpansionRequired: true}},
		{name: "ControllerExpand already larger than the limit is OK (idempotency)", method: "/csi.v1.Controller/ControllerExpandVolume",
			req:  &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 30, LimitBytes: 8 << 30}},
			resp: &csi.ControllerExpandVolumeResponse{CapacityBytes: 10 << 30}},
		{name: "ControllerExpand capacity 0 is not checked", method: "/csi.v1.Controller/ControllerExpandVolume",
			resp: &csi.ControllerExpandVolumeResponse{NodeExpansionRequired: true}},
		{name: "NodeExpand less than asked", method: "/csi.v1.Node/NodeExpandVolume",
			req:  &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: "/target", CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 30}},
			resp: &csi.NodeExpandVolumeResponse{CapacityBytes: 4 << 30}, code: codes.Internal, fragment: "capacity_bytes is 4294967296, less than the required_bytes 8589934592"},
		{name: "NodeExpand capacity unknown", method: "/csi.v1.Node/NodeExpandVolume",
			req:  &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: "/target", CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 30}},
			resp: &csi.NodeExpandVolumeResponse{}},
		{name: "NodeExpand without capacity_range", method: "/csi.v1.Node/NodeExpandVolume", resp: &csi.NodeExpandVolumeResponse{CapacityBytes: 1 << 30}},
		{name: "ControllerExpand negative", method: "/csi.v1.Controller/ControllerExpandVolume", resp: &csi.ControllerExpandVolumeResponse{CapacityBytes: -1},
			code: codes.Internal, fragment: "capacity_bytes must not be negative"},
		{name: "publish_context over 4 KiB", method: "/csi.v1.Controller/ControllerPublishVolume",
			resp: &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"lun": strings.Repeat("1", 4096)}},
			code: codes.Internal, fragment: "publish_context holds 4099 bytes"},

		{name: "NodeGetInfo without node_id", method: ni, resp: &csi.NodeGetInfoResponse{}, code: codes.Internal, fragment: "node_id is required"},
		{name: "NodeGetInfo node_id of 256 bytes", method: ni, resp: &csi.NodeGetInfoResponse{NodeId: strings.Repeat("n", 256)}},
		{name: "NodeGetInfo node_id of 257 bytes", method: ni, resp: &csi.NodeGetInfoResponse{NodeId: strings.Repeat("n", 257)}, code: codes.Internal, fragment: "node_id is 257 bytes long"},
		{name: "NodeGetInfo negative max volumes", method: ni, resp: &csi.NodeGetInfoResponse{NodeId: "n", MaxVolumesPerNode: -1}, code: codes.Internal, fragment: "max_volumes_per_node must not be negative"},
		{name: "NodeGetInfo topology without the capability", method: ni, caps: noTopology,
			resp: &csi.NodeGetInfoResponse{NodeId: "n", AccessibleTopology: valTopo("zone", "a")}, code: codes.Internal, fragment: "accessible_topology is set but"},
		{name: "NodeGetVolumeStats negative total", method: "/csi.v1.Node/NodeGetVolumeStats",
			resp: &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Total: -5, Unit: csi.VolumeUsage_BYTES}}}, code: codes.Internal, fragment: "usage[0].total must not be negative"},

		{name: "CreateVolumeGroup without group", method: "/volumegroup.Controller/CreateVolumeGroup", resp: &volumegroup.CreateVolumeGroupResponse{},
			code: codes.Unavailable, fragment: "volume_group is required"},
		{name: "volume group member without id", method: "/volumegroup.Controller/ControllerGetVolumeGroup",
			resp: &volumegroup.ControllerGetVolumeGroupResponse{VolumeGroup: &volumegroup.VolumeGroup{VolumeGroupId: "vg", Volumes: []*csi.Volume{{}}}},
			code: codes.Internal, fragment: "volume_group.volumes[0].volume_id is required"},
		{name: "group snapshot without snapshots", method: "/csi.v1.GroupController/CreateVolumeGroupSnapshot",
			resp: &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: &csi.VolumeGroupSnapshot{GroupSnapshotId: "g", CreationTime: timestamppb.Now()}},
			code: codes.Unavailable, fragment: "group_snapshot.snapshots is required"},
		{name: "DeleteVolume empty answer", method: "/csi.v1.Controller/DeleteVolume", resp: &csi.DeleteVolumeResponse{}},
	}
}

// TestValidateResponseRules: each answer rule, in enforce mode: the code the caller gets and
// the message naming the backend and the rule; a valid answer reaches the caller unchanged.
func TestValidateResponseRules(t *testing.T) {
	for _, tc := range responseRuleCases() {
		t.Run(tc.name, func(t *testing.T) {
			caps := tc.caps
			if caps == nil {
				caps = valAllCaps()
			}
			req := tc.req
			if req == nil {
				req = validRequests[tc.method]
			}
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			h := validationHandler(ValidationEnforce, validationFake(caps, tc.resp), slog.New(slog.DiscardHandler))
			got, err := runValidated(t, h, tc.method, req)
			checkRefusal(t, err, tc.code, tc.fragment)
			if tc.code == codes.OK && string(got) != string(want) {
				t.Errorf("the answer changed: %x, want %x", got, want)
			}
		})
	}
}

// TestValidateUndecodableResponse: an answer that is not the method's response message is
// INTERNAL.
func TestValidateUndecodableResponse(t *testing.T) {
	fake := &serverFake{answer: func(_ context.Context, method string, _ []byte) ([]byte, error) {
		if b, ok, err := valAllCaps().answer(method); ok {
			return b, err
		}
		return []byte{0x0a, 0x7f, 0x01}, nil // field 1, length 127, one byte
	}}
	h := validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler))
	_, err := runValidated(t, h, "/csi.v1.Controller/ControllerGetVolume", &csi.ControllerGetVolumeRequest{VolumeId: "v"})
	checkRefusal(t, err, codes.Internal, `backend "fake": malformed ControllerGetVolume answer: the answer is not a valid csi.v1.ControllerGetVolumeResponse`)
}
