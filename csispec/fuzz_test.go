package csispec

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/csi-gateway/csi-gateway/internal/protoread"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// fuzzMethods are the methods of every service of the CSI and VolumeGroup files, by full
// method name, with their request and answer types.
func fuzzMethods(t testing.TB) (names []string, in, out map[string]protoreflect.MessageType) {
	in, out = map[string]protoreflect.MessageType{}, map[string]protoreflect.MessageType{}
	for _, file := range []protoreflect.FileDescriptor{csi.File_csi_proto, volumegroup.File_volumegroup_volumegroup_proto} {
		for i := range file.Services().Len() {
			svc := file.Services().Get(i)
			for j := range svc.Methods().Len() {
				md := svc.Methods().Get(j)
				name := "/" + string(svc.FullName()) + "/" + string(md.Name())
				qt, err1 := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
				rt, err2 := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %v %v", name, err1, err2)
				}
				names, in[name], out[name] = append(names, name), qt, rt
			}
		}
	}
	slices.Sort(names)
	return names, in, out
}

// fuzzCaps advertises every capability but those whose bit is set in drop (by the index of
// each kind's numbers, modulo 8).
type fuzzCaps uint8

func (f fuzzCaps) Has(_ context.Context, _ string, kind CapKind, cap int32) (bool, bool) {
	return f&(1<<((uint(kind)*3+uint(cap))%8)) == 0, true
}

// FuzzCheck decodes arbitrary bytes into the request and the answer of a method the selector
// picks, and checks that the rule engine never panics, is deterministic (the same message
// gives the same violations, in the same order, every time), records no empty violation and
// at most MaxViolations, and finds the same whether it reads a message's Go struct or reads
// it through protoreflect alone (see sameThroughReflect). The second selector picks which
// capabilities the backend lacks. Besides the seeds below, testdata/fuzz/FuzzCheck holds
// those of proxy's FuzzValidateRequest (a valid request of every method, and every request
// and answer of the validation tests' rule tables), by method.
func FuzzCheck(f *testing.F) {
	names, in, out := fuzzMethods(f)
	index := func(method string) uint8 { return uint8(slices.Index(names, method)) }
	for method, m := range map[string]proto.Message{
		"/csi.v1.Controller/CreateVolume": &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{MountFlags: []string{"ro"}}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}},
			Secrets:                   map[string]string{"bad key!": "s"},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"Zone": "a", "zone": "b"}}}}},
		"/csi.v1.Node/NodePublishVolume":            &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "relative"},
		"/csi.v1.Controller/ListVolumes":            &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: &csi.Volume{}}}},
		"/csi.v1.Identity/GetPluginInfo":            &csi.GetPluginInfoResponse{Name: "Not A DNS Name"},
		"/volumegroup.Controller/CreateVolumeGroup": &volumegroup.CreateVolumeGroupRequest{Name: "vg"},
	} {
		f.Add(index(method), uint8(0), testutil.MustMarshal(f, m))
		f.Add(index(method), uint8(0xff), testutil.MustMarshal(f, m))
	}
	f.Add(uint8(0), uint8(3), []byte{0x0a, 0x7f})

	f.Fuzz(func(t *testing.T, which, drop uint8, data []byte) {
		method := names[int(which)%len(names)]
		caps := fuzzCaps(drop)
		req := in[method].New().Interface()
		if proto.Unmarshal(data, req) != nil {
			return // the gateway refuses undecodable requests before any rule
		}
		sameThroughReflect(t, method, req)
		first := CheckRequest(context.Background(), method, req, "fake", caps)
		if again := CheckRequest(context.Background(), method, req, "fake", caps); !slices.Equal(first, again) {
			t.Fatalf("%s: violations differ between runs:\n%v\n%v", method, first, again)
		}
		resp := out[method].New().Interface()
		if proto.Unmarshal(data, resp) != nil {
			return
		}
		sameThroughReflect(t, method, resp)
		answer := CheckResponse(context.Background(), method, req, resp, "fake", caps)
		if again := CheckResponse(context.Background(), method, req, resp, "fake", caps); !slices.Equal(answer, again) {
			t.Fatalf("%s: answer violations differ between runs:\n%v\n%v", method, answer, again)
		}
		for _, vl := range append(first, answer...) {
			if vl.Msg == "" || vl.Code == 0 {
				t.Fatalf("%s: empty violation %+v", method, vl)
			}
		}
		if len(first) > MaxViolations || len(answer) > MaxViolations {
			t.Fatalf("%s: more than %d violations", method, MaxViolations)
		}
	})
}

// sameThroughReflect fails unless the checker finds the same violations in m whether it reads
// the fields protoread.Struct knows from m's Go struct (as it does) or every field through
// protoreflect (with plans whose Structs know no field).
func sameThroughReflect(t *testing.T, method string, m proto.Message) {
	t.Helper()
	md := m.ProtoReflect().Descriptor()
	p, ok := reflectOnlyPlans.Load(md)
	if !ok {
		plans := map[protoreflect.MessageDescriptor]*rulePlan{}
		root := compileRules(md, plans)
		for _, q := range plans {
			q.goMaps = protoread.Struct{}
		}
		p, _ = reflectOnlyPlans.LoadOrStore(md, root)
	}
	for _, sd := range []side{requestSide, responseSide} {
		viaStruct, viaReflect := newChecker(sd), newChecker(sd)
		viaStruct.check(m.ProtoReflect())
		viaReflect.message(m.ProtoReflect(), reflect.Value{}, p.(*rulePlan))
		if !slices.Equal(viaStruct.out, viaReflect.out) {
			t.Fatalf("%s: the checker found\n%v\nreading Go structs, and\n%v\nthrough protoreflect", method, viaStruct.out, viaReflect.out)
		}
	}
}

// reflectOnlyPlans are sameThroughReflect's plans, by message descriptor.
var reflectOnlyPlans sync.Map
