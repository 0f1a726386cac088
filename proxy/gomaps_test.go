package proxy

import (
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
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
	s := newGoStruct(md)
	dyn := dynamicpb.NewMessage(md)
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(raw, dyn); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.of(req.ProtoReflect()); !ok {
		t.Error("a generated message not read by its struct")
	}
	if _, ok := s.of(dyn); ok {
		t.Error("a dynamic message read as a generated struct")
	}
	if _, ok := s.of((*csi.NodePublishVolumeRequest)(nil).ProtoReflect()); ok {
		t.Error("a nil message read as a generated struct")
	}
	for name, want := range map[protoreflect.Name]map[string]string{
		"secrets": req.Secrets, "volume_context": req.VolumeContext, "publish_context": nil,
	} {
		fd := md.Fields().ByName(name)
		got, dynamic := s.stringMap(req.ProtoReflect(), fd), s.stringMap(dyn, fd)
		if !maps.Equal(got, want) || !maps.Equal(dynamic, want) {
			t.Errorf("%s: generated %v, dynamic %v, want %v", name, got, dynamic, want)
		}
	}
}

// TestGoStructKinds checks which fields of generated messages are read from their Go structs.
func TestGoStructKinds(t *testing.T) {
	for _, tc := range []struct {
		md     protoreflect.MessageDescriptor
		fields map[protoreflect.Name]goKind
	}{
		{(&csi.NodePublishVolumeRequest{}).ProtoReflect().Descriptor(), map[protoreflect.Name]goKind{
			"volume_id": goReflect, "readonly": goReflect, "publish_context": goStringMap,
			"volume_capability": goMessage,
		}},
		{(&csi.VolumeCapability{}).ProtoReflect().Descriptor(), map[protoreflect.Name]goKind{
			"block": goReflect, "mount": goReflect, "access_mode": goMessage, // a oneof's members: protoreflect
		}},
		{(&csi.VolumeCapability_MountVolume{}).ProtoReflect().Descriptor(), map[protoreflect.Name]goKind{
			"fs_type": goReflect, "mount_flags": goStrings,
		}},
		{(&csi.ListVolumesResponse{}).ProtoReflect().Descriptor(), map[protoreflect.Name]goKind{"entries": goMessages}},
		{(&descriptorpb.FieldDescriptorProto{}).ProtoReflect().Descriptor(), map[protoreflect.Name]goKind{
			"name": goReflect, "options": goMessage,
		}},
	} {
		s := newGoStruct(tc.md)
		for name, want := range tc.fields {
			if got := s.fields[tc.md.Fields().ByName(name).Index()].kind; got != want {
				t.Errorf("%s.%s: kind %d, want %d", tc.md.FullName(), name, got, want)
			}
		}
	}
}
