package embedded

import (
	"context"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type identityServer struct {
	csi.UnimplementedIdentityServer
	a *Appliance
}

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{
		Name:          s.a.cfg.DriverName,
		VendorVersion: s.a.cfg.VendorVersion,
	}, nil
}

func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		service(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE),
		// Every snapshot carries the appliance's one zone as its accessible_topology, which
		// the spec allows only with this capability.
		service(csi.PluginCapability_Service_SNAPSHOT_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE,
		}}},
	}}, nil
}

// Probe reports ready when the data directory is still there and writable; otherwise the
// appliance cannot keep its promises and says FAILED_PRECONDITION.
func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	f, err := os.CreateTemp(s.a.cfg.DataDir, ".probe-*")
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "data directory %s is not writable: %v; check the disk and the directory's permissions", s.a.cfg.DataDir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
