package proxy

import (
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	// Registers grpc.health.v1 in the protobuf registry, so that the test shows lookupMethod
	// refuses it for its package, not because the registry lacks it.
	_ "google.golang.org/grpc/health/grpc_health_v1"
)

func TestLookupMethod(t *testing.T) {
	tests := []struct {
		method          string
		wantName        string // "" when lookupMethod must return nil
		wantIn, wantOut protoreflect.FullName
		wantStreaming   bool
	}{
		{"/csi.v1.Controller/CreateVolume", "CreateVolume", "csi.v1.CreateVolumeRequest", "csi.v1.CreateVolumeResponse", false},
		{"/csi.v1.Controller/DeleteVolume", "DeleteVolume", "csi.v1.DeleteVolumeRequest", "csi.v1.DeleteVolumeResponse", false},
		{"/csi.v1.Node/NodeStageVolume", "NodeStageVolume", "csi.v1.NodeStageVolumeRequest", "csi.v1.NodeStageVolumeResponse", false},
		{"/csi.v1.Identity/Probe", "Probe", "csi.v1.ProbeRequest", "csi.v1.ProbeResponse", false},
		{"/csi.v1.GroupController/DeleteVolumeGroupSnapshot", "DeleteVolumeGroupSnapshot",
			"csi.v1.DeleteVolumeGroupSnapshotRequest", "csi.v1.DeleteVolumeGroupSnapshotResponse", false},
		{"/csi.v1.SnapshotMetadata/GetMetadataAllocated", "GetMetadataAllocated",
			"csi.v1.GetMetadataAllocatedRequest", "csi.v1.GetMetadataAllocatedResponse", true},
		{"/csi.v1.SnapshotMetadata/GetMetadataDelta", "GetMetadataDelta",
			"csi.v1.GetMetadataDeltaRequest", "csi.v1.GetMetadataDeltaResponse", true},
		{"/volumegroup.Controller/CreateVolumeGroup", "CreateVolumeGroup",
			"volumegroup.CreateVolumeGroupRequest", "volumegroup.CreateVolumeGroupResponse", false},
		{"/volumegroup.Controller/DeleteVolumeGroup", "DeleteVolumeGroup",
			"volumegroup.DeleteVolumeGroupRequest", "volumegroup.DeleteVolumeGroupResponse", false},
		{"/csi.v0.Controller/CreateVolume", "CreateVolume", "csi.v0.CreateVolumeRequest", "csi.v0.CreateVolumeResponse", false},
		{"/csi.v0.Node/NodeGetId", "NodeGetId", "csi.v0.NodeGetIdRequest", "csi.v0.NodeGetIdResponse", false},

		// Not known: other packages (even when registered), unknown services and methods,
		// names that are not a service and a method.
		{method: "/grpc.health.v1.Health/Check"},
		{method: "/grpc.health.v1.Health/Watch"},
		{method: "/csi.v1.Controller/NoSuchMethod"},
		{method: "/csi.v1.NoSuchService/CreateVolume"},
		{method: "/csi.v1.CreateVolumeRequest/CreateVolume"}, // a message, not a service
		{method: "/csi.v1.Controller"},
		{method: "/csi.v1.Controller/CreateVolume/extra"},
		{method: "/csi.v0.Controller/ControllerGetVolume"}, // v1's, not v0's
		{method: "/"},
		{method: ""},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			info := lookupMethod(tt.method)
			if tt.wantName == "" {
				if info != nil {
					t.Fatalf("lookupMethod(%q) = %q, want nil", tt.method, info.desc.FullName())
				}
				return
			}
			if info == nil {
				t.Fatalf("lookupMethod(%q) = nil", tt.method)
			}
			if info.name != tt.wantName {
				t.Errorf("name = %q, want %q", info.name, tt.wantName)
			}
			if got := info.input.Descriptor().FullName(); got != tt.wantIn {
				t.Errorf("input = %s, want %s", got, tt.wantIn)
			}
			if got := info.output.Descriptor().FullName(); got != tt.wantOut {
				t.Errorf("output = %s, want %s", got, tt.wantOut)
			}
			if got := info.streaming(); got != tt.wantStreaming {
				t.Errorf("streaming() = %v, want %v", got, tt.wantStreaming)
			}
			// The Go types are the generated ones, so requests decode into them.
			if msg := info.input.New().Interface(); msg.ProtoReflect().Descriptor().FullName() != tt.wantIn {
				t.Errorf("input.New() is a %s", msg.ProtoReflect().Descriptor().FullName())
			}
		})
	}
}

// knownServiceMethods are the methods of every service the gateway decodes: CSI v1.13, the
// csi-addons VolumeGroup service and CSI v0 (v0.2 and v0.3's additions), written out so that a
// change of spec version shows here.
var knownServiceMethods = map[string][]string{
	"csi.v1.Identity": {"GetPluginInfo", "GetPluginCapabilities", "Probe"},
	"csi.v1.Controller": {"CreateVolume", "DeleteVolume", "ControllerPublishVolume", "ControllerUnpublishVolume",
		"ValidateVolumeCapabilities", "ListVolumes", "ControllerListVolumeHealth", "ControllerGetVolumeHealth",
		"GetCapacity", "ControllerGetCapabilities", "CreateSnapshot", "DeleteSnapshot", "ListSnapshots",
		"GetSnapshot", "ControllerExpandVolume", "ControllerGetVolume", "ControllerModifyVolume"},
	"csi.v1.GroupController": {"GroupControllerGetCapabilities", "CreateVolumeGroupSnapshot",
		"DeleteVolumeGroupSnapshot", "GetVolumeGroupSnapshot"},
	"csi.v1.SnapshotMetadata": {"GetMetadataAllocated", "GetMetadataDelta"},
	"csi.v1.Node": {"NodeStageVolume", "NodeUnstageVolume", "NodePublishVolume", "NodeUnpublishVolume",
		"NodeGetVolumeStats", "NodeGetVolumeHealth", "NodeGetStorageHealth", "NodeExpandVolume",
		"NodeGetCapabilities", "NodeGetInfo"},
	"volumegroup.Controller": {"CreateVolumeGroup", "ModifyVolumeGroupMembership", "DeleteVolumeGroup",
		"ListVolumeGroups", "ControllerGetVolumeGroup"},
	"csi.v0.Identity": {"GetPluginInfo", "GetPluginCapabilities", "Probe"},
	"csi.v0.Controller": {"CreateVolume", "DeleteVolume", "ControllerPublishVolume", "ControllerUnpublishVolume",
		"ValidateVolumeCapabilities", "ListVolumes", "GetCapacity", "ControllerGetCapabilities",
		"CreateSnapshot", "DeleteSnapshot", "ListSnapshots"},
	"csi.v0.Node": {"NodeStageVolume", "NodeUnstageVolume", "NodePublishVolume", "NodeUnpublishVolume",
		"NodeGetId", "NodeGetInfo", "NodeGetCapabilities"},
}

func TestNewMethodTable(t *testing.T) {
	// v1: 3 Identity + 17 Controller + 4 GroupController + 2 SnapshotMetadata + 10 Node;
	// 5 VolumeGroup; v0: 3 Identity + 11 Controller + 7 Node.
	const wantCount = 62
	var want []string
	for svc, methods := range knownServiceMethods {
		for _, m := range methods {
			want = append(want, "/"+svc+"/"+m)
		}
	}
	if len(want) != wantCount {
		t.Fatalf("the test's own list has %d methods, want %d", len(want), wantCount)
	}
	slices.Sort(want)

	table := newMethodTable()
	got := slices.Sorted(maps.Keys(table))
	if !slices.Equal(got, want) {
		for _, m := range got {
			if !slices.Contains(want, m) {
				t.Errorf("unexpected method in the table: %s", m)
			}
		}
		for _, m := range want {
			if !slices.Contains(got, m) {
				t.Errorf("method missing from the table: %s", m)
			}
		}
		t.Fatalf("the table has %d methods, want %d", len(got), wantCount)
	}
	for full, info := range table {
		if info == nil {
			t.Errorf("%s: nil info", full)
			continue
		}
		again := lookupMethod(full)
		if again == nil || again.desc != info.desc || again.name != info.name {
			t.Errorf("%s: table entry differs from lookupMethod", full)
		}
		wantStreaming := full == "/csi.v1.SnapshotMetadata/GetMetadataAllocated" || full == "/csi.v1.SnapshotMetadata/GetMetadataDelta"
		if info.streaming() != wantStreaming {
			t.Errorf("%s: streaming() = %v, want %v", full, info.streaming(), wantStreaming)
		}
	}
}
