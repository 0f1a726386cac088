package protoread

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestWireString: the key fields read off the wire, including the cases decoding handles
// specially.
func TestWireString(t *testing.T) {
	fields := (&csi.ControllerPublishVolumeRequest{}).ProtoReflect().Descriptor().Fields()
	volumeID, readonly := fields.ByName("volume_id"), fields.ByName("readonly")
	twice := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "first")
	twice = protowire.AppendString(protowire.AppendTag(twice, 1, protowire.BytesType), "last")
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff")
	truncated := protowire.AppendTag(nil, 1, protowire.BytesType)
	full, _ := proto.Marshal(&csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n", Secrets: map[string]string{"k": "s"}, Readonly: true})
	tests := []struct {
		name string
		raw  []byte
		fd   protoreflect.FieldDescriptor
		want string
		ok   bool
	}{
		{"among other fields", full, volumeID, "v", true},
		{"absent", []byte{}, volumeID, "", true},
		{"last occurrence wins", twice, volumeID, "last", true},
		{"not UTF-8", badUTF8, volumeID, "", false},
		{"truncated", truncated, volumeID, "", false},
		{"not wire format", []byte{0xff, 0xff}, volumeID, "", false},
		{"not a string field", full, readonly, "", false},
		{"no such field", full, nil, "", false},
	}
	for _, tt := range tests {
		if got, ok := WireString(tt.raw, tt.fd); got != tt.want || ok != tt.ok {
			t.Errorf("%s: WireString = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzWireString: whenever a request decodes, WireString reads its key fields exactly as
// decoding does.
func FuzzWireString(f *testing.F) {
	for _, m := range []proto.Message{
		&csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1", Readonly: true, Secrets: map[string]string{"a": "b"}},
		&csi.NodePublishVolumeRequest{VolumeId: "vol-2", TargetPath: "/t", VolumeContext: map[string]string{"x": "y"}},
		&csi.DeleteVolumeRequest{},
	} {
		raw, _ := proto.Marshal(m)
		f.Add(raw)
	}
	fields := (&csi.NodePublishVolumeRequest{}).ProtoReflect().Descriptor().Fields()
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req csi.NodePublishVolumeRequest
		if proto.Unmarshal(raw, &req) != nil {
			return
		}
		for _, name := range []protoreflect.Name{"volume_id", "target_path", "staging_target_path"} {
			got, ok := WireString(raw, fields.ByName(name))
			want := req.ProtoReflect().Get(fields.ByName(name)).String()
			if !ok || got != want {
				t.Fatalf("%s: WireString = %q, %v; decoding gives %q", name, got, ok, want)
			}
		}
	})
}
