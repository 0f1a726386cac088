package backends

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/protobuf/proto"
)

func TestCarriesSecrets(t *testing.T) {
	tests := []struct {
		name string
		m    proto.Message
		want bool
	}{
		{"secrets set", &csi.CreateVolumeRequest{Name: "v", Secrets: map[string]string{"password": "x"}}, true},
		{"no secrets", &csi.CreateVolumeRequest{Name: "v", Parameters: map[string]string{"password": "not marked"}}, false},
		{"empty secrets map", &csi.DeleteVolumeRequest{VolumeId: "v", Secrets: map[string]string{}}, false},
		{"node secrets", &csi.NodeStageVolumeRequest{VolumeId: "v", Secrets: map[string]string{"k": "v"}}, true},
		{"csi-addons secrets", &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: "g", Secrets: map[string]string{"k": "v"}}, true},
		{"mount flags are not CSI secrets", &csi.NodePublishVolumeRequest{VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{MountFlags: []string{"pw=x"}}}}}, false},
	}
	for _, tt := range tests {
		if got := CarriesSecrets(tt.m.ProtoReflect()); got != tt.want {
			t.Errorf("%s: CarriesSecrets = %v, want %v", tt.name, got, tt.want)
		}
	}
}
