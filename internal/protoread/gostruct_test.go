package protoread

import (
	"maps"
	"math"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestGoStructStringMap checks that the map<string, string> fields of a generated message are
// read from its own Go maps, and those of a dynamic message of the same type through
// protoreflect, with the same entries.
func TestGoStructStringMap(t *testing.T) {
	req := &csi.NodePublishVolumeRequest{
		VolumeId:      "vol-1",
		Secrets:       map[string]string{"password": "pw", "": "empty key"},
		VolumeContext: map[string]string{"pool": "gold"},
	}
	md := req.ProtoReflect().Descriptor()
	s := NewStruct(md)
	dyn := dynamicpb.NewMessage(md)
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(raw, dyn); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Of(req.ProtoReflect()); !ok {
		t.Error("a generated message not read by its struct")
	}
	if _, ok := s.Of(dyn); ok {
		t.Error("a dynamic message read as a generated struct")
	}
	if _, ok := s.Of((*csi.NodePublishVolumeRequest)(nil).ProtoReflect()); ok {
		t.Error("a nil message read as a generated struct")
	}
	for name, want := range map[protoreflect.Name]map[string]string{
		"secrets": req.Secrets, "volume_context": req.VolumeContext, "publish_context": nil,
	} {
		fd := md.Fields().ByName(name)
		got, dynamic := s.StringMap(req.ProtoReflect(), fd), s.StringMap(dyn, fd)
		if !maps.Equal(got, want) || !maps.Equal(dynamic, want) {
			t.Errorf("%s: generated %v, dynamic %v, want %v", name, got, dynamic, want)
		}
	}
}

// TestGoStructKinds checks which fields of generated messages are read from their Go structs.
func TestGoStructKinds(t *testing.T) {
	for _, tc := range []struct {
		md     protoreflect.MessageDescriptor
		fields map[protoreflect.Name]Kind
	}{
		{(&csi.NodePublishVolumeRequest{}).ProtoReflect().Descriptor(), map[protoreflect.Name]Kind{
			"volume_id": ScalarKind, "readonly": ScalarKind, "publish_context": StringMapKind,
			"volume_capability": MessageKind,
		}},
		{(&csi.VolumeCapability{}).ProtoReflect().Descriptor(), map[protoreflect.Name]Kind{
			"block": ByReflect, "mount": ByReflect, "access_mode": MessageKind, // a oneof's members: protoreflect
		}},
		{(&csi.VolumeCapability_MountVolume{}).ProtoReflect().Descriptor(), map[protoreflect.Name]Kind{
			"fs_type": ScalarKind, "mount_flags": StringsKind,
		}},
		{(&csi.ListVolumesResponse{}).ProtoReflect().Descriptor(), map[protoreflect.Name]Kind{"entries": MessagesKind}},
		{(&descriptorpb.FieldDescriptorProto{}).ProtoReflect().Descriptor(), map[protoreflect.Name]Kind{
			"name": ByReflect, "options": MessageKind, // proto2: name has presence, a *string
		}},
	} {
		s := NewStruct(tc.md)
		for name, want := range tc.fields {
			if got := s.fields[tc.md.Fields().ByName(name).Index()].Kind; got != want {
				t.Errorf("%s.%s: kind %d, want %d", tc.md.FullName(), name, got, want)
			}
		}
	}
}

// TestGoScalarValue: every plain scalar read from a Go struct is set when protoreflect's Has
// says so, with the value its Get returns, for each Go kind a scalar can have (-0.0 is set).
func TestGoScalarValue(t *testing.T) {
	for _, m := range []proto.Message{
		wrapperspb.String("x"), wrapperspb.Bool(true), wrapperspb.Int32(-3), wrapperspb.Int64(-1 << 40),
		wrapperspb.UInt32(7), wrapperspb.UInt64(1 << 63), wrapperspb.Float(1.5), wrapperspb.Double(math.Copysign(0, -1)),
		&wrapperspb.Int64Value{}, &wrapperspb.StringValue{},
		&csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		&csi.NodePublishVolumeRequest{VolumeId: "vol-1", Readonly: true},
	} {
		rm := m.ProtoReflect()
		md := rm.Descriptor()
		s := NewStruct(md)
		sv, ok := s.Of(rm)
		if !ok {
			t.Fatalf("%s: not read by its struct", md.FullName())
		}
		scalars := 0
		for i := range md.Fields().Len() {
			fd, f := md.Fields().Get(i), s.fields[i]
			if f.Kind != ScalarKind {
				continue
			}
			scalars++
			fv := sv.Field(f.Index)
			if IsSet(fv) != rm.Has(fd) {
				t.Errorf("%s: set %v, protoreflect says %v", fd.FullName(), IsSet(fv), rm.Has(fd))
			}
			if got, want := ScalarValue(fd, fv), rm.Get(fd); !got.Equal(want) {
				t.Errorf("%s: %v, protoreflect says %v", fd.FullName(), got, want)
			}
		}
		if scalars == 0 {
			t.Errorf("%s: no field read as a plain scalar", md.FullName())
		}
	}
}
