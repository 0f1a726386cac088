package proxy

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

// fakeCaps are the capability sets a validation test's backend advertises, by enum number.
type fakeCaps struct {
	mu                              sync.Mutex
	plugin, controller, node, group []int32
	err                             error // the answer to every capability RPC, when set
	fetches                         int   // capability RPCs answered
}

// allCaps advertises every capability of CSI v1.13.
func allCaps() *fakeCaps {
	return &fakeCaps{
		plugin:     []int32{1, 2, 3, 4, 5},
		controller: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17},
		node:       []int32{1, 2, 3, 5, 6, 7, 8},
		group:      []int32{1},
	}
}

// without returns a copy of fc that lacks the capabilities in drop.
func (fc *fakeCaps) without(drop ...capRef) *fakeCaps {
	out := &fakeCaps{plugin: fc.plugin, controller: fc.controller, node: fc.node, group: fc.group, err: fc.err}
	sets := [...]*[]int32{pluginCaps: &out.plugin, controllerCaps: &out.controller, nodeCaps: &out.node, groupCaps: &out.group}
	for _, r := range drop {
		set := sets[r.kind]
		*set = slices.DeleteFunc(slices.Clone(*set), func(c int32) bool { return c == r.cap })
	}
	return out
}

// answer answers method when it is a capability RPC.
func (fc *fakeCaps) answer(method string) (resp []byte, handled bool, err error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var m proto.Message
	switch method {
	case capRPCs[pluginCaps].method:
		r := &csi.GetPluginCapabilitiesResponse{}
		for _, c := range fc.plugin {
			r.Capabilities = append(r.Capabilities, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
				Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_Type(c)}}})
		}
		m = r
	case capRPCs[controllerCaps].method:
		r := &csi.ControllerGetCapabilitiesResponse{}
		for _, c := range fc.controller {
			r.Capabilities = append(r.Capabilities, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
				Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_Type(c)}}})
		}
		m = r
	case capRPCs[nodeCaps].method:
		r := &csi.NodeGetCapabilitiesResponse{}
		for _, c := range fc.node {
			r.Capabilities = append(r.Capabilities, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
				Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_Type(c)}}})
		}
		m = r
	case capRPCs[groupCaps].method:
		r := &csi.GroupControllerGetCapabilitiesResponse{}
		for _, c := range fc.group {
			r.Capabilities = append(r.Capabilities, &csi.GroupControllerServiceCapability{Type: &csi.GroupControllerServiceCapability_Rpc{
				Rpc: &csi.GroupControllerServiceCapability_RPC{Type: csi.GroupControllerServiceCapability_RPC_Type(c)}}})
		}
		m = r
	default:
		return nil, false, nil
	}
	fc.fetches++
	if fc.err != nil {
		return nil, true, fc.err
	}
	b, err := proto.Marshal(m)
	return b, true, err
}

func (fc *fakeCaps) fetchCount() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.fetches
}

// validationFake is a backend that advertises caps and answers any other call with resp
// (marshalled; the empty message when nil).
func validationFake(caps *fakeCaps, resp proto.Message) *serverFake {
	return &serverFake{answer: func(_ context.Context, method string, _ []byte) ([]byte, error) {
		if b, ok, err := caps.answer(method); ok {
			return b, err
		}
		if resp == nil {
			return nil, nil
		}
		return proto.Marshal(resp)
	}}
}

// forwarded returns the calls of f that are not capability RPCs.
func forwarded(f *serverFake) []string {
	var out []string
	for _, c := range f.recorded() {
		if !slices.ContainsFunc(capRPCs[:], func(r capRPC) bool { return r.method == c.method }) {
			out = append(out, c.method)
		}
	}
	return out
}

// validationHandler is the part of the server's chain around validation, in the server's
// order: validate → canonicalize → dispatch, every method routed to fake.
func validationHandler(mode ValidationMode, fake backends.Backend, log *slog.Logger) Handler {
	routes := routeTable{{Methods: []string{"*"}, Backend: "fake"}}
	bes := map[string]backends.Backend{"fake": fake}
	return chain(dispatch(routes, bes), validate(mode, routes, bes, log), canonicalize(NewRedactor()))
}

// runValidated sends req to method through h and returns the error and the raw answer.
func runValidated(t *testing.T, h Handler, method string, req proto.Message) (error, []byte) {
	t.Helper()
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	info := lookupMethod(method)
	if info == nil {
		t.Fatalf("%s is not a known method", method)
	}
	call := &Call{Method: method, Start: time.Now(), Request: raw, info: info}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = h(ctx, call)
	return err, call.Response
}

// checkRefusal checks err against the code and message fragment of a case ("" code OK).
func checkRefusal(t *testing.T, err error, want codes.Code, fragment string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != want {
		t.Fatalf("code = %v (%q), want %v", st.Code(), st.Message(), want)
	}
	if want == codes.OK {
		return
	}
	if !strings.Contains(st.Message(), fragment) {
		t.Errorf("message %q does not contain %q", st.Message(), fragment)
	}
	if len(st.Message()) > maxMessageBytes {
		t.Errorf("message of %d bytes", len(st.Message()))
	}
	if len(st.Proto().GetDetails()) != 0 {
		t.Errorf("status has details")
	}
}

func mountCapability(mode csi.VolumeCapability_AccessMode_Mode, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func writer(flags ...string) *csi.VolumeCapability {
	return mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, flags...)
}

func createVolume(edit func(r *csi.CreateVolumeRequest)) *csi.CreateVolumeRequest {
	r := &csi.CreateVolumeRequest{Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{writer()}}
	if edit != nil {
		edit(r)
	}
	return r
}

func topo(kv ...string) *csi.Topology {
	t := &csi.Topology{Segments: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Segments[kv[i]] = kv[i+1]
	}
	return t
}

// validRequests are a valid request of every unary method the gateway checks, and of the
// streaming SnapshotMetadata ones: none may be refused (no false positives).
var validRequests = map[string]proto.Message{
	"/csi.v1.Identity/GetPluginInfo":                    &csi.GetPluginInfoRequest{},
	"/csi.v1.Identity/GetPluginCapabilities":            &csi.GetPluginCapabilitiesRequest{},
	"/csi.v1.Identity/Probe":                            &csi.ProbeRequest{},
	"/csi.v1.Controller/CreateVolume":                   createVolume(nil),
	"/csi.v1.Controller/DeleteVolume":                   &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"user.name": "x"}},
	"/csi.v1.Controller/ControllerPublishVolume":        &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: strings.Repeat("n", 256), VolumeCapability: writer()},
	"/csi.v1.Controller/ControllerUnpublishVolume":      &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1"},
	"/csi.v1.Controller/ValidateVolumeCapabilities":     &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1", VolumeCapabilities: []*csi.VolumeCapability{writer()}},
	"/csi.v1.Controller/ListVolumes":                    &csi.ListVolumesRequest{MaxEntries: 10, StartingToken: "t"},
	"/csi.v1.Controller/GetCapacity":                    &csi.GetCapacityRequest{AccessibleTopology: topo("topology.example.com/zone", "z1")},
	"/csi.v1.Controller/ControllerGetCapabilities":      &csi.ControllerGetCapabilitiesRequest{},
	"/csi.v1.Controller/CreateSnapshot":                 &csi.CreateSnapshotRequest{SourceVolumeId: "vol-1", Name: "snap-1"},
	"/csi.v1.Controller/DeleteSnapshot":                 &csi.DeleteSnapshotRequest{SnapshotId: "snap-1"},
	"/csi.v1.Controller/ListSnapshots":                  &csi.ListSnapshotsRequest{},
	"/csi.v1.Controller/GetSnapshot":                    &csi.GetSnapshotRequest{SnapshotId: "snap-1"},
	"/csi.v1.Controller/ControllerExpandVolume":         &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}},
	"/csi.v1.Controller/ControllerGetVolume":            &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"},
	"/csi.v1.Controller/ControllerModifyVolume":         &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{"iops": "100"}},
	"/csi.v1.Controller/ControllerGetVolumeHealth":      &csi.ControllerGetVolumeHealthRequest{VolumeId: "vol-1"},
	"/csi.v1.Controller/ControllerListVolumeHealth":     &csi.ControllerListVolumeHealthRequest{},
	"/csi.v1.GroupController/CreateVolumeGroupSnapshot": &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"vol-1"}},
	"/csi.v1.GroupController/DeleteVolumeGroupSnapshot": &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g", SnapshotIds: []string{"s"}},
	"/csi.v1.GroupController/GetVolumeGroupSnapshot":    &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "g", SnapshotIds: []string{"s"}},
	"/csi.v1.Node/NodeStageVolume": &csi.NodeStageVolumeRequest{VolumeId: "vol-1", VolumeCapability: writer(),
		StagingTargetPath: "/var/lib/kubelet/plugins/kubernetes.io/csi/example.com/" + strings.Repeat("a", 200) + "/globalmount"},
	"/csi.v1.Node/NodeUnstageVolume": &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging"},
	"/csi.v1.Node/NodePublishVolume": &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging",
		TargetPath: "/var/lib/kubelet/pods/" + strings.Repeat("p", 150) + "/mount", VolumeCapability: writer()},
	"/csi.v1.Node/NodeUnpublishVolume":                       &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/target"},
	"/csi.v1.Node/NodeGetVolumeStats":                        &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: "/target"},
	"/csi.v1.Node/NodeExpandVolume":                          &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: "/target"},
	"/csi.v1.Node/NodeGetVolumeHealth":                       &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1"},
	"/csi.v1.Node/NodeGetStorageHealth":                      &csi.NodeGetStorageHealthRequest{},
	"/csi.v1.Node/NodeGetCapabilities":                       &csi.NodeGetCapabilitiesRequest{},
	"/csi.v1.Node/NodeGetInfo":                               &csi.NodeGetInfoRequest{},
	"/csi.v1.GroupController/GroupControllerGetCapabilities": &csi.GroupControllerGetCapabilitiesRequest{},
	"/volumegroup.Controller/CreateVolumeGroup":              &volumegroup.CreateVolumeGroupRequest{Name: "vg"},
	"/volumegroup.Controller/DeleteVolumeGroup":              &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: "vg-1"},
	"/volumegroup.Controller/ModifyVolumeGroupMembership":    &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: "vg-1"},
	"/volumegroup.Controller/ControllerGetVolumeGroup":       &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: "vg-1"},
	"/volumegroup.Controller/ListVolumeGroups":               &volumegroup.ListVolumeGroupsRequest{MaxEntries: 3},
	"/csi.v1.SnapshotMetadata/GetMetadataAllocated":          &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1"},
	"/csi.v1.SnapshotMetadata/GetMetadataDelta":              &csi.GetMetadataDeltaRequest{BaseSnapshotId: "a", TargetSnapshotId: "b"},
}

// TestValidateValidRequestsPass: a valid request of every method passes every rule, with a
// backend that advertises everything.
func TestValidateValidRequestsPass(t *testing.T) {
	for method := range newMethodTable() {
		if _, ok := validRequests[method]; !ok && !lookupMethod(method).desc.IsStreamingClient() {
			t.Errorf("no valid request for %s in validRequests", method)
		}
	}
	for method, req := range validRequests {
		t.Run(method, func(t *testing.T) {
			v := &validator{mode: ValidationEnforce, routes: routeTable{{Methods: []string{"*"}, Backend: "fake"}},
				caps: newCapabilityCache(map[string]backends.Backend{"fake": validationFake(allCaps(), nil)}, slog.New(slog.DiscardHandler), time.Minute)}
			if vs := v.checkRequest(context.Background(), method, "fake", req); len(vs) != 0 {
				t.Errorf("refused: %v", vs)
			}
		})
	}
}

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
		{"name missing", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.Name = "" }), codes.InvalidArgument, "invalid CreateVolume request: name is required"},
		{"volume_capabilities empty", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = nil }), codes.InvalidArgument, "volume_capabilities is required"},
		{"access_mode missing", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].AccessMode = nil }), codes.InvalidArgument, "volume_capabilities[0].access_mode is required"},
		{"access mode UNKNOWN", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = append(r.VolumeCapabilities, mountCapability(csi.VolumeCapability_AccessMode_UNKNOWN))
		}), codes.InvalidArgument, "volume_capabilities[1].access_mode.mode is required"},
		{"access type missing", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].AccessType = nil }), codes.InvalidArgument, "volume_capabilities[0].access_type is required: set block or mount"},
		{"block access type", cv, createVolume(func(r *csi.CreateVolumeRequest) {
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
		{"NodeStage without path", "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "v", VolumeCapability: writer()}, codes.InvalidArgument, "staging_target_path is required"},
		{"NodePublish without target", "/csi.v1.Node/NodePublishVolume", &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: writer()}, codes.InvalidArgument, "target_path is required"},
		{"NodeGetVolumeStats without path", "/csi.v1.Node/NodeGetVolumeStats", &csi.NodeGetVolumeStatsRequest{VolumeId: "v"}, codes.InvalidArgument, "volume_path is required"},
		{"delete group snapshot without snapshot_ids", "/csi.v1.GroupController/DeleteVolumeGroupSnapshot", &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g"}, codes.OK, ""},
		{"group snapshot without sources", "/csi.v1.GroupController/CreateVolumeGroupSnapshot", &csi.CreateVolumeGroupSnapshotRequest{Name: "g"}, codes.InvalidArgument, "source_volume_ids is required"},
		{"volume group without name", "/volumegroup.Controller/CreateVolumeGroup", &volumegroup.CreateVolumeGroupRequest{}, codes.InvalidArgument, "name is required"},
		{"modify group without id", "/volumegroup.Controller/ModifyVolumeGroupMembership", &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeIds: []string{"v"}}, codes.InvalidArgument, "volume_group_id is required"},
		{"metadata delta without target", "/csi.v1.SnapshotMetadata/GetMetadataDelta", &csi.GetMetadataDeltaRequest{BaseSnapshotId: "a"}, codes.InvalidArgument, "target_snapshot_id is required"},

		// Sizes.
		{"name of 129 bytes", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.Name = long }), codes.InvalidArgument, "name is 129 bytes long; CSI allows at most 128"},
		{"name of 128 bytes", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.Name = long[:128] }), codes.OK, ""},
		{"volume_id of 129 bytes", "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: long}, codes.InvalidArgument, "volume_id is 129 bytes long"},
		{"node_id of 257 bytes", "/csi.v1.Controller/ControllerPublishVolume", &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: strings.Repeat("n", 257), VolumeCapability: writer()},
			codes.InvalidArgument, "node_id is 257 bytes long; CSI allows at most 256"},
		{"parameters over 4 KiB", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.Parameters = map[string]string{"k": strings.Repeat("v", 4096)} }),
			codes.InvalidArgument, "parameters holds 4097 bytes (keys and values); CSI allows at most 4096"},
		{"volume_context over 4 KiB", "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: writer(),
			VolumeContext: map[string]string{"a": strings.Repeat("v", 2048), "b": strings.Repeat("v", 2048)}}, codes.InvalidArgument, "volume_context holds 4098 bytes"},
		{"secrets over 4 KiB pass", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.Secrets = map[string]string{"ca.crt": strings.Repeat("v", 8192)} }), codes.OK, ""},
		{"mount flag longer than 128 bytes", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0] = writer(strings.Repeat("o", 200)) }), codes.OK, ""},
		{"mount_flags over 4 KiB", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities[0] = writer(strings.Repeat("o", 2048), strings.Repeat("p", 2049))
		}), codes.InvalidArgument, "volume_capabilities[0].mount.mount_flags hold 4097 bytes together; CSI allows at most 4096"},
		{"path of 300 bytes", "/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: "/" + strings.Repeat("p", 299)}, codes.OK, ""},
		{"path over PATH_MAX", "/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: "/" + strings.Repeat("p", 4096)},
			codes.InvalidArgument, "target_path is 4097 bytes long; CSI allows at most 4096"},
		{"starting_token of 129 bytes", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{StartingToken: long}, codes.InvalidArgument, "starting_token is 129 bytes long"},
		{"fs_type of 129 bytes", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].GetMount().FsType = long }), codes.InvalidArgument, "volume_capabilities[0].mount.fs_type is 129 bytes long"},

		// Names.
		{"name with U+0001", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.Name = "pvc\x01" }), codes.InvalidArgument, "name contains the control character U+0001, which CSI forbids in names"},
		{"name with U+0085", "/csi.v1.Controller/CreateSnapshot", &csi.CreateSnapshotRequest{SourceVolumeId: "v", Name: "snap\u0085"}, codes.InvalidArgument, "name contains the control character U+0085"},
		{"name with U+001F", "/csi.v1.GroupController/CreateVolumeGroupSnapshot", &csi.CreateVolumeGroupSnapshotRequest{Name: "g\x1f", SourceVolumeIds: []string{"v"}}, codes.InvalidArgument, "U+001F"},
		{"name with tab, newline and unicode", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.Name = "pvc\t\n\r-ボリューム" }), codes.OK, ""},

		// Numbers.
		{"negative required_bytes", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.CapacityRange = &csi.CapacityRange{RequiredBytes: -1} }),
			codes.InvalidArgument, "capacity_range.required_bytes must not be negative"},
		{"negative limit_bytes", "/csi.v1.Controller/ControllerExpandVolume", &csi.ControllerExpandVolumeRequest{VolumeId: "v", CapacityRange: &csi.CapacityRange{RequiredBytes: 5, LimitBytes: -5}},
			codes.InvalidArgument, "capacity_range.limit_bytes must not be negative"},
		{"limit below required", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.CapacityRange = &csi.CapacityRange{RequiredBytes: 10, LimitBytes: 5}
		}),
			codes.InvalidArgument, "capacity_range.limit_bytes is 5, less than capacity_range.required_bytes (10)"},
		{"limit equal to required", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.CapacityRange = &csi.CapacityRange{RequiredBytes: 10, LimitBytes: 10}
		}), codes.OK, ""},
		{"empty capacity_range", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.CapacityRange = &csi.CapacityRange{} }),
			codes.InvalidArgument, "capacity_range must set required_bytes or limit_bytes"},
		{"negative max_entries", "/csi.v1.Controller/ListSnapshots", &csi.ListSnapshotsRequest{MaxEntries: -1}, codes.InvalidArgument, "max_entries must not be negative"},
		{"negative group max_entries", "/volumegroup.Controller/ListVolumeGroups", &volumegroup.ListVolumeGroupsRequest{MaxEntries: -3}, codes.InvalidArgument, "max_entries must not be negative"},
		{"negative starting_offset", "/csi.v1.SnapshotMetadata/GetMetadataAllocated", &csi.GetMetadataAllocatedRequest{SnapshotId: "s", StartingOffset: -1}, codes.InvalidArgument, "starting_offset must not be negative"},

		// Content source.
		{"content source without type", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.VolumeContentSource = &csi.VolumeContentSource{} }),
			codes.InvalidArgument, "volume_content_source must name a snapshot or a volume"},
		{"snapshot source without id", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{}}}
		}), codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id is required"},
		{"volume source without id", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{}}}
		}), codes.InvalidArgument, "volume_content_source.volume.volume_id is required"},
		{"volume source", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "v"}}}
		}), codes.OK, ""},

		// Topology.
		{"empty topology requirement", cv, createVolume(func(r *csi.CreateVolumeRequest) { r.AccessibilityRequirements = &csi.TopologyRequirement{} }),
			codes.InvalidArgument, "accessibility_requirements must set requisite or preferred"},
		{"preferred not requisite", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("zone", "a")}, Preferred: []*csi.Topology{topo("zone", "b")}}
		}), codes.InvalidArgument, "accessibility_requirements.preferred[0] is not in accessibility_requirements.requisite"},
		{"preferred within requisite", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("zone", "a", "rack", "r1"), topo("zone", "b")},
				Preferred: []*csi.Topology{topo("rack", "r1", "zone", "a")}}
		}), codes.OK, ""},
		{"preferred only", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Preferred: []*csi.Topology{topo("topology.kubernetes.io/zone", "us-east-1a")}}
		}), codes.OK, ""},
		{"topology key with upper-case prefix", cv, createVolume(func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("Example.com/zone", "a")}}
		}), codes.InvalidArgument, `accessibility_requirements.requisite[0].segments: key "Example.com/zone" has a prefix that is not a lower-case domain name`},
		{"topology key name with a space", "/csi.v1.Controller/GetCapacity", &csi.GetCapacityRequest{AccessibleTopology: topo("my zone", "a")},
			codes.InvalidArgument, `accessible_topology.segments: key "my zone" has a name that is not`},
		{"topology value too long", "/csi.v1.Controller/GetCapacity", &csi.GetCapacityRequest{AccessibleTopology: topo("zone", strings.Repeat("a", 64))},
			codes.InvalidArgument, `the value of key "zone" must be 1 to 63 characters`},
		{"topology empty value", "/csi.v1.Controller/GetCapacity", &csi.GetCapacityRequest{AccessibleTopology: topo("zone", "")},
			codes.InvalidArgument, `the value of key "zone"`},
		{"topology keys differing in case", "/csi.v1.Controller/GetCapacity", &csi.GetCapacityRequest{AccessibleTopology: topo("Zone", "a", "zone", "a")},
			codes.InvalidArgument, "differ only in case"},

		// Secrets and paths.
		{"secrets key with a slash", "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "v", Secrets: map[string]string{"a/b": "x"}},
			codes.InvalidArgument, "secrets has a key that is not made of alphanumerics, '-', '_' and '.'"},
		{"secrets empty key", "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: writer(), Secrets: map[string]string{"": "x"}},
			codes.InvalidArgument, "secrets has a key"},
		{"relative staging path", "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "staging/v", VolumeCapability: writer()},
			codes.InvalidArgument, "staging_target_path must be an absolute path"},
		{"relative target path", "/csi.v1.Node/NodePublishVolume", &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", TargetPath: "t", VolumeCapability: writer()},
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
			fake := validationFake(allCaps(), nil)
			err, _ := runValidated(t, validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler)), tc.method, tc.req)
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
			if got := forwarded(fake); !slices.Equal(got, want) {
				t.Errorf("the backend got %v, want %v", got, want)
			}
		})
	}
}

// TestValidateUndecodableRequest: bytes that are not the method's request message are
// INVALID_ARGUMENT.
func TestValidateUndecodableRequest(t *testing.T) {
	fake := validationFake(allCaps(), nil)
	h := validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler))
	method := "/csi.v1.Controller/DeleteVolume"
	call := &Call{Method: method, Start: time.Now(), Request: []byte{0x0a, 0x05, 'a'}, info: lookupMethod(method)}
	checkRefusal(t, h(context.Background(), call), codes.InvalidArgument, "request is not a valid csi.v1.DeleteVolumeRequest")
	if got := forwarded(fake); len(got) != 0 {
		t.Errorf("the backend got %v", got)
	}
}

// TestValidateWarnForwardsAndLogs: in warn mode, what enforce refuses is logged at warn
// level and forwarded, and a malformed answer reaches the caller.
func TestValidateWarnForwardsAndLogs(t *testing.T) {
	var log serverLog
	logger := slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fake := validationFake(allCaps().without(ctrlCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES)), nil)
	h := validationHandler(ValidationWarn, fake, logger)

	err, resp := runValidated(t, h, "/csi.v1.Controller/CreateVolume", createVolume(func(r *csi.CreateVolumeRequest) { r.Name = "" }))
	if err != nil || len(resp) != 0 {
		t.Fatalf("CreateVolume = %v, %x; want the backend's empty answer", err, resp)
	}
	if err, _ := runValidated(t, h, "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{}); err != nil {
		t.Fatalf("ListVolumes = %v, want forwarded", err)
	}
	if got, want := forwarded(fake), []string{"/csi.v1.Controller/CreateVolume", "/csi.v1.Controller/ListVolumes"}; !slices.Equal(got, want) {
		t.Errorf("the backend got %v, want %v", got, want)
	}
	lines := log.lines(t, "validation")
	if len(lines) != 3 {
		t.Fatalf("%d validation lines, want 3 (bad request, bad answer, ungated method):\n%s", len(lines), log.String())
	}
	for i, want := range []map[string]any{
		{"level": "WARN", "method": "CreateVolume", "backend": "fake", "side": "request", "would_refuse_with": "InvalidArgument",
			"problem": "csi-gateway: invalid CreateVolume request: name is required"},
		{"level": "WARN", "method": "CreateVolume", "side": "response", "would_refuse_with": "Unavailable"},
		{"level": "WARN", "method": "ListVolumes", "side": "request", "would_refuse_with": "Unimplemented"},
	} {
		for k, v := range want {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, lines[i][k], v)
			}
		}
	}
	if p, _ := lines[1]["problem"].(string); !strings.Contains(p, `backend "fake": malformed CreateVolume answer: volume is required`) {
		t.Errorf("problem = %q", p)
	}
}

// TestValidateOffForwardsSilently: off checks nothing, fetches no capabilities and logs
// nothing; neither does the zero Options.
func TestValidateOffForwardsSilently(t *testing.T) {
	for _, mode := range []ValidationMode{ValidationOff, ""} {
		t.Run(string(mode), func(t *testing.T) {
			var log serverLog
			caps := allCaps().without(ctrlCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME))
			fake := validationFake(caps, nil)
			h := validationHandler(mode, fake, slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})))
			if err, _ := runValidated(t, h, "/csi.v1.Controller/CreateVolume", &csi.CreateVolumeRequest{Name: "pvc\x01"}); err != nil {
				t.Fatalf("CreateVolume = %v, want forwarded", err)
			}
			if got := forwarded(fake); len(got) != 1 {
				t.Errorf("the backend got %v", got)
			}
			if n := caps.fetchCount(); n != 0 {
				t.Errorf("%d capability fetches, want none", n)
			}
			if log.String() != "" {
				t.Errorf("logged:\n%s", log.String())
			}
		})
	}
}

// TestValidateRefusalSurvivesCanonicalize: a refusal keeps its code and message should the
// chain ever put canonicalize outside validation.
func TestValidateRefusalSurvivesCanonicalize(t *testing.T) {
	routes := routeTable{{Methods: []string{"*"}, Backend: "fake"}}
	for _, tc := range []struct {
		caps *fakeCaps
		req  proto.Message
		code codes.Code
	}{
		{allCaps(), &csi.DeleteVolumeRequest{}, codes.InvalidArgument},
		{allCaps().without(ctrlCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)), &csi.DeleteVolumeRequest{VolumeId: "v"}, codes.Unimplemented},
	} {
		bes := map[string]backends.Backend{"fake": validationFake(tc.caps, nil)}
		inner := chain(dispatch(routes, bes), validate(ValidationEnforce, routes, bes, slog.New(slog.DiscardHandler)))
		outer := chain(dispatch(routes, bes), canonicalize(NewRedactor()), validate(ValidationEnforce, routes, bes, slog.New(slog.DiscardHandler)))
		errIn, _ := runValidated(t, inner, "/csi.v1.Controller/DeleteVolume", tc.req)
		errOut, _ := runValidated(t, outer, "/csi.v1.Controller/DeleteVolume", tc.req)
		if status.Code(errIn) != tc.code || status.Convert(errIn).Message() != status.Convert(errOut).Message() || status.Code(errOut) != tc.code {
			t.Errorf("validate alone: %v; under canonicalize: %v; want %v both, same message", errIn, errOut, tc.code)
		}
	}
}

// TestValidationThroughServer: the server's chain validates when Options.Validation says
// so: a bad request is refused over gRPC and never reaches the backend.
func TestValidationThroughServer(t *testing.T) {
	fake := validationFake(allCaps(), &csi.DeleteVolumeResponse{})
	opts := serverFakeOptions(fake)
	opts.Validation = ValidationEnforce
	ts := startServerHarness(t, opts, ListenerPolicy{}, slog.LevelInfo)
	ctl := csi.NewControllerClient(ts.conn)
	_, err := ctl.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: strings.Repeat("v", 200)})
	checkRefusal(t, err, codes.InvalidArgument, "csi-gateway: invalid DeleteVolume request: volume_id is 200 bytes long; CSI allows at most 128")
	if _, err := ctl.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-1"}); err != nil {
		t.Fatalf("valid DeleteVolume: %v", err)
	}
	if got := forwarded(fake); !slices.Equal(got, []string{"/csi.v1.Controller/DeleteVolume"}) {
		t.Errorf("the backend got %v, want the valid DeleteVolume only", got)
	}
	lines := ts.log.lines(t, "call")
	if len(lines) != 2 || lines[0]["code"] != "InvalidArgument" {
		t.Errorf("call log lines: %v", lines)
	}
}

// TestValidationOfEmptyRequests: a request with no field set arrives as no bytes at all; it is
// checked like any other (gated here, as the backend does not list volumes).
func TestValidationOfEmptyRequests(t *testing.T) {
	fake := validationFake(allCaps().without(ctrlCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES)), &csi.GetPluginInfoResponse{})
	opts := serverFakeOptions(fake)
	opts.Validation = ValidationEnforce
	ts := startServerHarness(t, opts, ListenerPolicy{}, slog.LevelInfo)
	_, err := csi.NewControllerClient(ts.conn).ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{})
	checkRefusal(t, err, codes.Unimplemented, "controller capability LIST_VOLUMES, which ListVolumes needs")
	_, err = csi.NewIdentityClient(ts.conn).GetPluginInfo(serverCallCtx(t), &csi.GetPluginInfoRequest{})
	checkRefusal(t, err, codes.Internal, `backend "fake": malformed GetPluginInfo answer: name is required; vendor_version is required`)
	if got := forwarded(fake); !slices.Equal(got, []string{"/csi.v1.Identity/GetPluginInfo"}) {
		t.Errorf("the backend got %v", got)
	}
}

func TestParseValidationMode(t *testing.T) {
	for in, want := range map[string]ValidationMode{"": ValidationEnforce, "enforce": ValidationEnforce, " Warn ": ValidationWarn, "OFF": ValidationOff} {
		if got, err := ParseValidationMode(in); err != nil || got != want {
			t.Errorf("ParseValidationMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseValidationMode("strict"); err == nil || err.Error() != `unknown validation mode "strict"; use enforce, warn or off` {
		t.Errorf("ParseValidationMode(strict) = %v", err)
	}
}
