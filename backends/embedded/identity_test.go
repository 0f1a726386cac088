package embedded

import (
	"context"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestGetPluginCapabilities(t *testing.T) {
	resp, err := (&identityServer{a: openTest(t, Config{})}).GetPluginCapabilities(context.Background(), &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var services []csi.PluginCapability_Service_Type
	var expansion []csi.PluginCapability_VolumeExpansion_Type
	for _, c := range resp.GetCapabilities() {
		if s := c.GetService(); s != nil {
			services = append(services, s.GetType())
		}
		if e := c.GetVolumeExpansion(); e != nil {
			expansion = append(expansion, e.GetType())
		}
	}
	want := []csi.PluginCapability_Service_Type{
		csi.PluginCapability_Service_CONTROLLER_SERVICE,
		csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS,
		csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE,
		csi.PluginCapability_Service_SNAPSHOT_ACCESSIBILITY_CONSTRAINTS, // snapshots carry the zone
	}
	if !slices.Equal(services, want) {
		t.Errorf("service capabilities %v, want %v", services, want)
	}
	if !slices.Equal(expansion, []csi.PluginCapability_VolumeExpansion_Type{csi.PluginCapability_VolumeExpansion_ONLINE}) {
		t.Errorf("volume expansion %v, want [ONLINE]", expansion)
	}
}
