package proxy

import (
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// TestGoStringMaps checks that the map<string, string> fields of a generated message are read
// from its own Go maps, and those of a dynamic message of the same type through protoreflect,
// with the same entries.
func TestGoStringMaps(t *testing.T) {
	req := &csi.NodePublishVolumeRequest{
		VolumeId:      "vol-1",
		Secrets:       map[string]string{"password": "pw", "": "empty key"},
		VolumeContext: map[string]string{"pool": "gold"},
	}
	md := req.ProtoReflect().Descriptor()
	g := newGoStringMaps(md)
	dyn := dynamicpb.NewMessage(md)
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(raw, dyn); err != nil {
		t.Fatal(err)
	}
	for _, name := range []protoreflect.Name{"secrets", "volume_context", "publish_context"} {
		fd := md.Fields().ByName(name)
		gm, ok := g.get(req.ProtoReflect(), fd.Index())
		if !ok {
			t.Fatalf("%s: not read from the generated struct", name)
		}
		if _, ok := g.get(dyn, fd.Index()); ok {
			t.Errorf("%s: a dynamic message read as a generated struct", name)
		}
		if want := g.stringMap(dyn, fd); !maps.Equal(gm, want) || !maps.Equal(g.stringMap(req.ProtoReflect(), fd), want) {
			t.Errorf("%s: generated %v, dynamic %v", name, gm, want)
		}
	}
	if _, ok := g.get(req.ProtoReflect(), md.Fields().ByName("volume_id").Index()); ok {
		t.Error("volume_id read as a map")
	}
	if none := newGoStringMaps(dyn.Descriptor().Fields().ByName("volume_capability").Message()); none.goType != nil {
		t.Error("VolumeCapability has no map<string, string> field, yet a goStringMaps")
	}
}
