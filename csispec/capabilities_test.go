package csispec

import (
	"maps"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestCapKindDecode: each kind's set is read from its answer, by enum number; a plugin's
// volume_expansion capability is not a service, and a capability with no type is skipped.
func TestCapKindDecode(t *testing.T) {
	for _, tc := range []struct {
		kind CapKind
		resp proto.Message
		want []int32
	}{
		{PluginCaps, &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
			{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
			{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_OFFLINE}}},
			{},
		}}, []int32{int32(csi.PluginCapability_Service_CONTROLLER_SERVICE)}},
		{ControllerCaps, &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
			{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_LIST_VOLUMES}}},
			{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CLONE_VOLUME}}},
		}}, []int32{int32(csi.ControllerServiceCapability_RPC_LIST_VOLUMES), int32(csi.ControllerServiceCapability_RPC_CLONE_VOLUME)}},
		{NodeCaps, &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
			{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}},
		}}, []int32{int32(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)}},
		{GroupCaps, &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{
			{Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT}}},
		}}, []int32{int32(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)}},
	} {
		set, err := tc.kind.Decode(testutil.MustMarshal(t, tc.resp))
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(set)); !slices.Equal(got, slices.Sorted(slices.Values(tc.want))) {
			t.Errorf("%s: read %v, want %v", tc.kind.Method(), got, tc.want)
		}
		if k, ok := CapKindOf(tc.kind.Method()); !ok || k != tc.kind {
			t.Errorf("CapKindOf(%s) = %v, %v", tc.kind.Method(), k, ok)
		}
	}
	if _, err := ControllerCaps.Decode([]byte{0x0a, 0x7f}); err == nil {
		t.Error("an undecodable answer decoded")
	}
}
