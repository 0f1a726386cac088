package translate

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestV0RoundTrip sends every v0 request (all fields set, secrets included) to a v1 backend
// that is itself a v0 driver behind translation: the request crosses to v1 and back, and
// the driver must get exactly what the caller sent — every v0 field has a v1 home. The one
// v0 field v1 lacks (ValidateVolumeCapabilities' accessible_topology) is the only loss, and
// NodeGetId arrives as the NodeGetInfo it is answered from.
func TestV0RoundTrip(t *testing.T) {
	d := &v0Driver{}
	b := New("front", New("legacy", d.serve(t), V0), V1)
	requests := testutil.V0Requests(map[string]string{"password": "canary"})
	requests["/csi.v0.Controller/CreateVolume"].(*csiv0.CreateVolumeRequest).VolumeContentSource = &csiv0.VolumeContentSource{
		Type: &csiv0.VolumeContentSource_Snapshot{Snapshot: &csiv0.VolumeContentSource_SnapshotSource{Id: "snap-1"}}}
	requests["/csi.v0.Controller/CreateVolume"].(*csiv0.CreateVolumeRequest).AccessibilityRequirements = &csiv0.TopologyRequirement{
		Requisite: []*csiv0.Topology{{Segments: map[string]string{"zone": "a"}}}, Preferred: []*csiv0.Topology{{Segments: map[string]string{"zone": "a"}}}}
	for _, method := range slices.Sorted(maps.Keys(requests)) {
		req := requests[method]
		if _, ok := translations[method]; !ok {
			t.Errorf("%s has no translation to v1", method)
			continue
		}
		wire, _ := proto.Marshal(req)
		b.Unary(context.Background(), method, wire) // the driver's answer does not matter here
		got, want := d.lastRequest(), proto.Clone(req)
		switch method {
		case "/csi.v0.Controller/ValidateVolumeCapabilities":
			want.(*csiv0.ValidateVolumeCapabilitiesRequest).AccessibleTopology = nil
		case "/csi.v0.Node/NodeGetId":
			want = &csiv0.NodeGetInfoRequest{}
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s: the driver got\n%v\nthe caller sent\n%v", method, got, want)
		}
	}
}

// TestEveryV0MethodTranslated: every method of the v0 services has a translation to v1, and
// every v1 method that has one targets a v0 method that exists.
func TestEveryV0MethodTranslated(t *testing.T) {
	for _, svc := range []string{"csi.v0.Identity", "csi.v0.Controller", "csi.v0.Node"} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			t.Fatal(err)
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			full := "/" + svc + "/" + string(methods.Get(i).Name())
			if _, ok := translations[full]; !ok {
				t.Errorf("%s has no translation", full)
			}
		}
	}
	for m := range translations {
		if !strings.HasPrefix(m, v1Prefix) && !strings.HasPrefix(m, v0Prefix) {
			t.Errorf("translation of %s, a method of neither version", m)
		}
	}
}

// TestCapabilitiesIntersected: a v0 caller of a v1 backend (the embedded appliance, which
// advertises clones, expansion, volume groups...) is told only of what v0 can ask for.
func TestCapabilitiesIntersected(t *testing.T) {
	app := openAppliance(t)
	b := New("app", app, V1)

	var plugin csiv0.GetPluginCapabilitiesResponse
	if err := call(t, b, "/csi.v0.Identity/GetPluginCapabilities", &csiv0.GetPluginCapabilitiesRequest{}, &plugin); err != nil {
		t.Fatal(err)
	}
	for _, c := range plugin.GetCapabilities() {
		if c.GetService().GetType() > csiv0.PluginCapability_Service_ACCESSIBILITY_CONSTRAINTS || c.GetService() == nil {
			t.Errorf("plugin capability %v has no v0 equivalent", c)
		}
	}
	var ctrl csiv0.ControllerGetCapabilitiesResponse
	if err := call(t, b, "/csi.v0.Controller/ControllerGetCapabilities", &csiv0.ControllerGetCapabilitiesRequest{}, &ctrl); err != nil {
		t.Fatal(err)
	}
	var types []csiv0.ControllerServiceCapability_RPC_Type
	for _, c := range ctrl.GetCapabilities() {
		types = append(types, c.GetRpc().GetType())
	}
	want := []csiv0.ControllerServiceCapability_RPC_Type{csiv0.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csiv0.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME, csiv0.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csiv0.ControllerServiceCapability_RPC_GET_CAPACITY, csiv0.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csiv0.ControllerServiceCapability_RPC_LIST_SNAPSHOTS}
	slices.Sort(types)
	if !slices.Equal(types, want) {
		t.Errorf("controller capabilities %v, want v0's six", types)
	}
	var node csiv0.NodeGetCapabilitiesResponse
	if err := call(t, b, "/csi.v0.Node/NodeGetCapabilities", &csiv0.NodeGetCapabilitiesRequest{}, &node); err != nil {
		t.Fatal(err)
	}
	if len(node.GetCapabilities()) != 1 || node.GetCapabilities()[0].GetRpc().GetType() != csiv0.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME {
		t.Errorf("node capabilities %v, want STAGE_UNSTAGE_VOLUME only", node.GetCapabilities())
	}

	d := &v0Driver{caps: []csiv0.ControllerServiceCapability_RPC_Type{csiv0.ControllerServiceCapability_RPC_LIST_SNAPSHOTS, 9}}
	legacy := New("legacy", d.serve(t), V0)
	var v1plugin csi.GetPluginCapabilitiesResponse
	if err := call(t, legacy, "/csi.v1.Identity/GetPluginCapabilities", &csi.GetPluginCapabilitiesRequest{}, &v1plugin); err != nil {
		t.Fatal(err)
	}
	if len(v1plugin.GetCapabilities()) != 2 {
		t.Errorf("a v0 driver's plugin capabilities %v, want its two v0 services", v1plugin.GetCapabilities())
	}
	var v1ctrl csi.ControllerGetCapabilitiesResponse
	if err := call(t, legacy, "/csi.v1.Controller/ControllerGetCapabilities", &csi.ControllerGetCapabilitiesRequest{}, &v1ctrl); err != nil {
		t.Fatal(err)
	}
	if len(v1ctrl.GetCapabilities()) != 1 || v1ctrl.GetCapabilities()[0].GetRpc().GetType() != csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS {
		t.Errorf("a v0 driver's controller capabilities %v, want LIST_SNAPSHOTS (9 is not a v0 value)", v1ctrl.GetCapabilities())
	}
}

// TestCannotCross: what a v1 caller asks for that v0 cannot express is refused with
// INVALID_ARGUMENT naming it, before the v0 driver is called; ValidateVolumeCapabilities of
// such a capability is answered not confirmed.
func TestCannotCross(t *testing.T) {
	d := &v0Driver{}
	b := New("legacy", d.serve(t), V0)
	mount := func(group string, mode csi.VolumeCapability_AccessMode_Mode) []*csi.VolumeCapability {
		return []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{VolumeMountGroup: group}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}}
	}
	for _, tt := range []struct {
		name string
		req  *csi.CreateVolumeRequest
		want string
	}{
		{"clone", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: mount("", 1), VolumeContentSource: &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "vol-0"}}}}, "CLONE_VOLUME"},
		{"mutable parameters", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: mount("", 1), MutableParameters: map[string]string{"iops": "9"}}, "MODIFY_VOLUME"},
		{"mount group", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: mount("fsgroup", 1)}, "VOLUME_MOUNT_GROUP"},
		{"single-node single writer", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: mount("", csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)}, "SINGLE_NODE_SINGLE_WRITER"},
	} {
		err := call(t, b, "/csi.v1.Controller/CreateVolume", tt.req, &csi.CreateVolumeResponse{})
		wantCode(t, tt.name, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `backend "legacy"`) {
			t.Errorf("%s: message %q, want it to name %s and the backend", tt.name, err, tt.want)
		}
	}
	if got := d.requests("CreateVolume"); len(got) != 0 {
		t.Errorf("the driver got %d CreateVolume calls", len(got))
	}
	var resp csi.ValidateVolumeCapabilitiesResponse
	if err := call(t, b, "/csi.v1.Controller/ValidateVolumeCapabilities", &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1",
		VolumeCapabilities: mount("", csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.GetConfirmed() != nil || !strings.Contains(resp.GetMessage(), "SINGLE_NODE_MULTI_WRITER") {
		t.Errorf("ValidateVolumeCapabilities of a mode v0 lacks: %v, want not confirmed, saying why", &resp)
	}
}

// TestV1FieldsToV0: a v1 request's fields land in their v0 homes (secrets, contexts,
// capabilities, topology, snapshot source), and the v0 answer comes back in v1's.
func TestV1FieldsToV0(t *testing.T) {
	d := &v0Driver{}
	b := New("legacy", d.serve(t), V0)
	req := &csi.CreateVolumeRequest{Name: "pvc", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 2 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}},
		Parameters: map[string]string{"tier": "gold"}, Secrets: map[string]string{"password": "canary"},
		VolumeContentSource:       &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}},
		AccessibilityRequirements: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{"zone": "b"}}}}}
	var resp csi.CreateVolumeResponse
	if err := call(t, b, "/csi.v1.Controller/CreateVolume", req, &resp); err != nil {
		t.Fatal(err)
	}
	want := &csiv0.CreateVolumeRequest{Name: "pvc", CapacityRange: &csiv0.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 2 << 30},
		VolumeCapabilities: []*csiv0.VolumeCapability{{AccessType: &csiv0.VolumeCapability_Block{Block: &csiv0.VolumeCapability_BlockVolume{}},
			AccessMode: &csiv0.VolumeCapability_AccessMode{Mode: csiv0.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}},
		Parameters: map[string]string{"tier": "gold"}, ControllerCreateSecrets: map[string]string{"password": "canary"},
		VolumeContentSource:       &csiv0.VolumeContentSource{Type: &csiv0.VolumeContentSource_Snapshot{Snapshot: &csiv0.VolumeContentSource_SnapshotSource{Id: "snap-1"}}},
		AccessibilityRequirements: &csiv0.TopologyRequirement{Preferred: []*csiv0.Topology{{Segments: map[string]string{"zone": "b"}}}}}
	if got := d.lastRequest(); !proto.Equal(got, want) {
		t.Errorf("the driver got\n%v\nwant\n%v", got, want)
	}
	wantResp := &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-pvc", CapacityBytes: 1 << 30, VolumeContext: map[string]string{"a": "b"},
		ContentSource:      req.GetVolumeContentSource(),
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{"zone": "b"}}}}}
	if !proto.Equal(&resp, wantResp) {
		t.Errorf("the caller got\n%v\nwant\n%v", &resp, wantResp)
	}

	var validated csi.ValidateVolumeCapabilitiesResponse
	vreq := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1", VolumeContext: map[string]string{"supported": "yes"},
		VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: map[string]string{"tier": "gold"}}
	if err := call(t, b, "/csi.v1.Controller/ValidateVolumeCapabilities", vreq, &validated); err != nil {
		t.Fatal(err)
	}
	wantConfirmed := &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeContext: vreq.GetVolumeContext(), VolumeCapabilities: vreq.GetVolumeCapabilities()}
	if !proto.Equal(validated.GetConfirmed(), wantConfirmed) || validated.GetMessage() != "checked" {
		t.Errorf("ValidateVolumeCapabilities: %v, want the context and capabilities confirmed, parameters not", &validated)
	}
}
