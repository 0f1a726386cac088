package proxy

import (
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestRequestIDs: the identifying fields a request sets, read off the wire; none from bytes
// that are not a message.
func TestRequestIDs(t *testing.T) {
	publish, _ := proto.Marshal(&csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1",
		Secrets: map[string]string{"password": "not-an-id"}, VolumeContext: map[string]string{"name": "not-an-id"}})
	create, _ := proto.Marshal(&csi.CreateVolumeRequest{Name: "pvc-1", Parameters: map[string]string{"volume_id": "x"}})
	publishType := (&csi.ControllerPublishVolumeRequest{}).ProtoReflect().Descriptor()
	createType := (&csi.CreateVolumeRequest{}).ProtoReflect().Descriptor()
	tests := []struct {
		name string
		md   protoreflect.MessageDescriptor
		raw  []byte
		want map[string]string
	}{
		{"publish", publishType, publish, map[string]string{"volume_id": "vol-1", "node_id": "node-1"}},
		{"create", createType, create, map[string]string{"name": "pvc-1"}},
		{"empty", publishType, nil, nil},
		{"not a message", publishType, []byte{0xff, 0xff}, nil},
	}
	for _, tt := range tests {
		if got := requestIDs(idFieldsOf(tt.md), tt.raw); !maps.Equal(got, tt.want) {
			t.Errorf("%s: requestIDs = %v, want %v", tt.name, got, tt.want)
		}
	}
}
