package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/test/bench/messages"
)

// backendEnv names the variable that makes this binary the benchmark's CSI driver, serving
// on the Unix socket it names until it is signalled. The bench re-executes itself with it so
// that the driver runs in a process of its own, apart from the client and the relay.
const backendEnv = "CSI_GATEWAY_BENCH_BACKEND"

// driverName is what the benchmark driver reports in GetPluginInfo.
const driverName = "bench.csi-gateway.io"

// driver is a CSI driver that answers from memory: no disk, no mounts, nothing kept between
// calls, so the measurements are of the transport and the relay, not of storage. It
// advertises exactly the capabilities the workloads need, so the gateway's validation lets
// them through.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	csi.UnimplementedSnapshotMetadataServer

	// Built once and marshalled by every call (concurrent marshalling is safe).
	listVolumes *csi.ListVolumesResponse
	metadata    []*csi.GetMetadataAllocatedResponse
}

// runBackend serves the driver on socket until SIGTERM or SIGINT.
func runBackend(socket string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveBackend(ctx, socket)
}

// serveBackend serves the driver on socket until ctx ends.
func serveBackend(ctx context.Context, socket string) error {
	d := &driver{listVolumes: messages.ListVolumesResponse()}
	for i := range messages.SnapshotMetadataResponses {
		d.metadata = append(d.metadata, messages.GetMetadataAllocatedResponse(i))
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	csi.RegisterSnapshotMetadataServer(srv, d)
	return serveUnix(ctx, socket, srv, grpc.ErrServerStopped)
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: driverName, VendorVersion: "1.0.0"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		pluginService(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		pluginService(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		pluginService(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE),
	}}, nil
}

func pluginService(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
	return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return messages.CreateVolumeResponse(req.GetName()), nil
}

func (d *driver) ListVolumes(context.Context, *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	return d.listVolumes, nil
}

// NodeGetCapabilities advertises nothing: NodePublishVolume needs no capability.
func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: "node-1"}, nil
}

func (d *driver) NodePublishVolume(context.Context, *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) GetMetadataAllocated(_ *csi.GetMetadataAllocatedRequest, stream csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	for _, m := range d.metadata {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}
