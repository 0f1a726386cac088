package embedded

import (
	"context"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// controllerServer is the CSI Controller service. Its methods live in volumes.go,
// publish.go, snapshots.go and health.go.
type controllerServer struct {
	csi.UnimplementedControllerServer
	a *Appliance
}

var controllerCapabilities = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csi.ControllerServiceCapability_RPC_GET_VOLUME,
	csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
	csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
	csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH, // the spec requires GET_VOLUME_HEALTH with it
}

func (c *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: each(controllerCapabilities, func(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
	})}, nil
}

// Volume parameters the appliance understands. They are recorded and reported, as a real
// array's service levels would be; "tier", "iops" and "throughput" may also be changed later
// with ControllerModifyVolume.
var (
	volumeParameterKeys  = []string{"tier", "iops", "throughput"}
	mutableParameterKeys = []string{"tier", "iops", "throughput"}
)

// checkVolumeParameters checks keys and values of volume parameters.
func checkVolumeParameters(field string, m map[string]string, known []string) error {
	if err := checkParameters(field, m, known); err != nil {
		return err
	}
	for k, v := range m {
		switch k {
		case "tier":
			if v != "standard" && v != "premium" {
				return invalid("%s: tier %q is not one of standard, premium", field, v)
			}
		case "iops", "throughput":
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
				return invalid("%s: %s must be a positive whole number, got %q", field, k, v)
			}
		}
	}
	return nil
}

// csiVolume renders a volume record for a response.
func (a *Appliance) csiVolume(v *volume) *csi.Volume {
	out := &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.CapacityBytes,
		AccessibleTopology: []*csi.Topology{a.topology()},
	}
	switch {
	case v.SourceSnapshotID != "":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshotID}}}
	case v.SourceVolumeID != "":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceVolumeID}}}
	}
	return out
}

// notFound is the NOT_FOUND status for a missing object of the given kind.
func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %.128q does not exist on this appliance", kind, id)
}
