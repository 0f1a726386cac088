package proxy

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/csispec"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// gatingCase is one capability rule: the backend lacks the capabilities in drop, and the
// caller of method with req gets code and fragment (codes.OK: forwarded).
type gatingCase struct {
	name     string
	drop     []csispec.CapRef
	method   string
	req      proto.Message // nil: validRequests[method]
	code     codes.Code
	fragment string
}

func gatingCases() []gatingCase {
	c := csispec.ControllerCap
	n := csispec.NodeCap
	p := csispec.PluginCap
	v0c := func(t csiv0.ControllerServiceCapability_RPC_Type) csispec.CapRef {
		return csispec.CapRef{Kind: csispec.V0ControllerCaps, Cap: int32(t)}
	}
	group := csispec.GroupCap(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)
	unimpl := func(name string, ref csispec.CapRef, method, capName string) gatingCase {
		short := method[strings.LastIndexByte(method, '/')+1:]
		return gatingCase{name: name, drop: []csispec.CapRef{ref}, method: method, code: codes.Unimplemented,
			fragment: `csi-gateway: backend "fake" does not advertise the ` + capName + ", which " + short + " needs"}
	}
	ro := &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n", VolumeCapability: valWriter(), Readonly: true}
	snode := valMountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)
	return []gatingCase{
		unimpl("CreateVolume", c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME), "/csi.v1.Controller/CreateVolume", "controller capability CREATE_DELETE_VOLUME"),
		unimpl("CreateSnapshot", c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT), "/csi.v1.Controller/CreateSnapshot", "controller capability CREATE_DELETE_SNAPSHOT"),
		unimpl("DeleteSnapshot", c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT), "/csi.v1.Controller/DeleteSnapshot", "controller capability CREATE_DELETE_SNAPSHOT"),
		unimpl("ListVolumes", c(csi.ControllerServiceCapability_RPC_LIST_VOLUMES), "/csi.v1.Controller/ListVolumes", "controller capability LIST_VOLUMES"),
		unimpl("ListSnapshots", c(csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS), "/csi.v1.Controller/ListSnapshots", "controller capability LIST_SNAPSHOTS"),
		unimpl("GetCapacity", c(csi.ControllerServiceCapability_RPC_GET_CAPACITY), "/csi.v1.Controller/GetCapacity", "controller capability GET_CAPACITY"),
		unimpl("ControllerPublish", c(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), "/csi.v1.Controller/ControllerPublishVolume", "controller capability PUBLISH_UNPUBLISH_VOLUME"),
		unimpl("ControllerUnpublish", c(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), "/csi.v1.Controller/ControllerUnpublishVolume", "controller capability PUBLISH_UNPUBLISH_VOLUME"),
		unimpl("ControllerExpand", c(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME), "/csi.v1.Controller/ControllerExpandVolume", "controller capability EXPAND_VOLUME"),
		unimpl("ControllerGetVolume", c(csi.ControllerServiceCapability_RPC_GET_VOLUME), "/csi.v1.Controller/ControllerGetVolume", "controller capability GET_VOLUME"),
		unimpl("ControllerModifyVolume", c(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME), "/csi.v1.Controller/ControllerModifyVolume", "controller capability MODIFY_VOLUME"),
		unimpl("GetSnapshot", c(csi.ControllerServiceCapability_RPC_GET_SNAPSHOT), "/csi.v1.Controller/GetSnapshot", "controller capability GET_SNAPSHOT"),
		unimpl("ControllerGetVolumeHealth", c(csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH), "/csi.v1.Controller/ControllerGetVolumeHealth", "controller capability GET_VOLUME_HEALTH"),
		unimpl("NodeStage", n(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), "/csi.v1.Node/NodeStageVolume", "node capability STAGE_UNSTAGE_VOLUME"),
		unimpl("NodeUnstage", n(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), "/csi.v1.Node/NodeUnstageVolume", "node capability STAGE_UNSTAGE_VOLUME"),
		unimpl("NodeExpandVolume", n(csi.NodeServiceCapability_RPC_EXPAND_VOLUME), "/csi.v1.Node/NodeExpandVolume", "node capability EXPAND_VOLUME"),
		unimpl("NodeGetVolumeStats", n(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS), "/csi.v1.Node/NodeGetVolumeStats", "node capability GET_VOLUME_STATS"),
		unimpl("CreateVolumeGroupSnapshot", group, "/csi.v1.GroupController/CreateVolumeGroupSnapshot", "group controller capability CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT"),
		unimpl("GetVolumeGroupSnapshot", group, "/csi.v1.GroupController/GetVolumeGroupSnapshot", "group controller capability CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT"),
		unimpl("GetMetadataDelta", p(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE), "/csi.v1.SnapshotMetadata/GetMetadataDelta", "plugin capability SNAPSHOT_METADATA_SERVICE"),
		// CSI v0: its own capability RPCs and enums.
		unimpl("v0 CreateVolume", v0c(csiv0.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME), "/csi.v0.Controller/CreateVolume", "v0 controller capability CREATE_DELETE_VOLUME"),
		unimpl("v0 ControllerUnpublish", v0c(csiv0.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), "/csi.v0.Controller/ControllerUnpublishVolume", "v0 controller capability PUBLISH_UNPUBLISH_VOLUME"),
		unimpl("v0 ListSnapshots", v0c(csiv0.ControllerServiceCapability_RPC_LIST_SNAPSHOTS), "/csi.v0.Controller/ListSnapshots", "v0 controller capability LIST_SNAPSHOTS"),
		unimpl("v0 NodeStage", csispec.CapRef{Kind: csispec.V0NodeCaps, Cap: int32(csiv0.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)}, "/csi.v0.Node/NodeStageVolume", "v0 node capability STAGE_UNSTAGE_VOLUME"),
		{name: "v1's capability does not gate v0", drop: []csispec.CapRef{c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)}, method: "/csi.v0.Controller/DeleteVolume"},
		{name: "unrelated capability missing", drop: []csispec.CapRef{c(csi.ControllerServiceCapability_RPC_LIST_VOLUMES)}, method: "/csi.v1.Controller/DeleteVolume"},
		{name: "ValidateVolumeCapabilities is never gated", drop: []csispec.CapRef{c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)}, method: "/csi.v1.Controller/ValidateVolumeCapabilities"},
		{name: "volumegroup is not gated", drop: []csispec.CapRef{group}, method: "/volumegroup.Controller/DeleteVolumeGroup"},

		{name: "NodePublish without staging path, node stages", method: "/csi.v1.Node/NodePublishVolume",
			req:  &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: valWriter()},
			code: codes.FailedPrecondition, fragment: `csi-gateway: staging_target_path is required: backend "fake" advertises the node capability STAGE_UNSTAGE_VOLUME; call NodeStageVolume first`},
		{name: "NodePublish without staging path, node does not stage", drop: []csispec.CapRef{n(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)},
			method: "/csi.v1.Node/NodePublishVolume", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: valWriter()}},
		{name: "accessibility_requirements without topology", drop: []csispec.CapRef{p(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)},
			method: "/csi.v1.Controller/CreateVolume", req: valCreateVolume(func(r *csi.CreateVolumeRequest) {
				r.AccessibilityRequirements = &csi.TopologyRequirement{Preferred: []*csi.Topology{valTopo("zone", "a")}}
			}), code: codes.InvalidArgument,
			fragment: `invalid CreateVolume request: accessibility_requirements must not be set: backend "fake" does not advertise the plugin capability VOLUME_ACCESSIBILITY_CONSTRAINTS`},
		{name: "an empty accessibility_requirements (Nomad 1.9) without topology", drop: []csispec.CapRef{p(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)},
			method: "/csi.v1.Controller/CreateVolume", req: valCreateVolume(func(r *csi.CreateVolumeRequest) {
				r.AccessibilityRequirements = &csi.TopologyRequirement{}
			})},
		{name: "GetCapacity topology without topology", drop: []csispec.CapRef{p(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)},
			method: "/csi.v1.Controller/GetCapacity", code: codes.InvalidArgument, fragment: "accessible_topology must not be set"},
		{name: "snapshot accessibility without the capability", drop: []csispec.CapRef{p(csi.PluginCapability_Service_SNAPSHOT_ACCESSIBILITY_CONSTRAINTS)},
			method: "/csi.v1.Controller/CreateSnapshot", req: &csi.CreateSnapshotRequest{SourceVolumeId: "v", Name: "s",
				AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{valTopo("zone", "a")}}},
			code: codes.InvalidArgument, fragment: "plugin capability SNAPSHOT_ACCESSIBILITY_CONSTRAINTS"},
		{name: "readonly publish without PUBLISH_READONLY", drop: []csispec.CapRef{c(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY)},
			method: "/csi.v1.Controller/ControllerPublishVolume", req: ro, code: codes.InvalidArgument,
			fragment: `invalid ControllerPublishVolume request: readonly must not be set: backend "fake" does not advertise the controller capability PUBLISH_READONLY`},
		{name: "readonly publish with PUBLISH_READONLY", method: "/csi.v1.Controller/ControllerPublishVolume", req: ro},
		{name: "volume from snapshot without snapshots", drop: []csispec.CapRef{c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT)},
			method: "/csi.v1.Controller/CreateVolume", req: valCreateVolume(func(r *csi.CreateVolumeRequest) {
				r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "s"}}}
			}), code: codes.InvalidArgument, fragment: "volume_content_source.snapshot must not be set"},
		{name: "clone without CLONE_VOLUME", drop: []csispec.CapRef{c(csi.ControllerServiceCapability_RPC_CLONE_VOLUME)},
			method: "/csi.v1.Controller/CreateVolume", req: valCreateVolume(func(r *csi.CreateVolumeRequest) {
				r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "v"}}}
			}), code: codes.InvalidArgument, fragment: "volume_content_source.volume must not be set: backend \"fake\" does not advertise the controller capability CLONE_VOLUME"},
		{name: "mutable_parameters without MODIFY_VOLUME", drop: []csispec.CapRef{c(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME)},
			method: "/csi.v1.Controller/CreateVolume", req: valCreateVolume(func(r *csi.CreateVolumeRequest) { r.MutableParameters = map[string]string{"iops": "5"} }),
			code: codes.InvalidArgument, fragment: "mutable_parameters must not be set"},
		{name: "single-node single-writer without the capability", drop: []csispec.CapRef{c(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)},
			method: "/csi.v1.Controller/CreateVolume", req: valCreateVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = []*csi.VolumeCapability{snode} }),
			code: codes.InvalidArgument, fragment: "volume_capabilities[0].access_mode SINGLE_NODE_SINGLE_WRITER must not be set: backend \"fake\" does not advertise the controller capability SINGLE_NODE_MULTI_WRITER"},
		{name: "single-node mode on a node without the capability", drop: []csispec.CapRef{n(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)},
			method: "/csi.v1.Node/NodeStageVolume", req: &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: snode},
			code: codes.InvalidArgument, fragment: "node capability SINGLE_NODE_MULTI_WRITER"},
	}
}

// TestCapabilityGating: each capability rule against a backend that answers the capability
// RPCs; a refused call never reaches the backend.
func TestCapabilityGating(t *testing.T) {
	for _, tc := range gatingCases() {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			if req == nil {
				req = validRequests[tc.method]
			}
			info := lookupMethod(tc.method)
			answer := info.output.New().Interface() // a valid answer for the cases that pass
			switch tc.method {
			case "/csi.v1.Controller/CreateVolume":
				answer = &csi.CreateVolumeResponse{Volume: valVolume(nil)}
			}
			fake := validationFake(valAllCaps().without(tc.drop...), answer)
			h := validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler))
			var err error
			if info.desc.IsStreamingServer() {
				err = validationStream(t, h, tc.method, req)
			} else {
				_, err = runValidated(t, h, tc.method, req)
			}
			checkRefusal(t, err, tc.code, tc.fragment)
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

// validationStream runs a server-streaming call through h: the request is checked, the
// stream is the backend's (the fake refuses streams with UNIMPLEMENTED, which counts as
// forwarded here).
func validationStream(t *testing.T, h Handler, method string, req proto.Message) error {
	t.Helper()
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	call := &Call{Method: method, Start: time.Now(), Request: raw, info: lookupMethod(method), Stream: &replayStream{first: raw}}
	err = h(context.Background(), call)
	if err != nil && strings.Contains(err.Error(), "no streams here") {
		return nil
	}
	return err
}

// TestGateNodeGetVolumeStatsBeforeV113: a node plugin of CSI v1.12 or older that advertises
// VOLUME_CONDITION (4, removed in v1.13) but not GET_VOLUME_STATS serves NodeGetVolumeStats
// (the older spec made it implement the RPC for either): the call is forwarded. Without
// either capability it is refused.
func TestGateNodeGetVolumeStatsBeforeV113(t *testing.T) {
	const method = "/csi.v1.Node/NodeGetVolumeStats"
	stats := csispec.NodeCap(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS)
	for _, tc := range []struct {
		name string
		node []int32
		code codes.Code
	}{
		{"VOLUME_CONDITION only", []int32{1, 4}, codes.OK},
		{"GET_VOLUME_STATS and VOLUME_CONDITION", []int32{1, 2, 4}, codes.OK},
		{"neither", []int32{1, 3}, codes.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps := valAllCaps().without(stats)
			caps.node = tc.node
			fake := validationFake(caps, &csi.NodeGetVolumeStatsResponse{})
			h := validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler))
			_, err := runValidated(t, h, method, validRequests[method])
			checkRefusal(t, err, tc.code, "does not advertise the node capability GET_VOLUME_STATS, which NodeGetVolumeStats needs")
			if forwarded := len(valForwarded(fake)) == 1; forwarded != (tc.code == codes.OK) {
				t.Errorf("forwarded = %v, want %v", forwarded, tc.code == codes.OK)
			}
		})
	}
}
