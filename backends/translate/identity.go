package translate

import (
	"context"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// Identity and node identity: plugin info and Probe have the same fields in both versions
// (a v0.2 driver's empty ProbeResponse reads as ready, as v1 says of an unset ready).

func pluginInfoToV1(r *csiv0.GetPluginInfoResponse) *csi.GetPluginInfoResponse {
	return &csi.GetPluginInfoResponse{Name: r.GetName(), VendorVersion: r.GetVendorVersion(), Manifest: r.GetManifest()}
}

func pluginInfoToV0(r *csi.GetPluginInfoResponse) *csiv0.GetPluginInfoResponse {
	return &csiv0.GetPluginInfoResponse{Name: r.GetName(), VendorVersion: r.GetVendorVersion(), Manifest: r.GetManifest()}
}

func probedToV1(r *csiv0.ProbeResponse) *csi.ProbeResponse {
	return &csi.ProbeResponse{Ready: r.GetReady()}
}

func probedToV0(r *csi.ProbeResponse) *csiv0.ProbeResponse {
	return &csiv0.ProbeResponse{Ready: r.GetReady()}
}

// probeV0 is Ready for a v0 driver: its Identity/Probe answers, and does not say ready=false.
func probeV0(ctx context.Context, name string, be backends.Backend) error {
	raw, err := be.Unary(ctx, "/csi.v0.Identity/Probe", nil)
	if err != nil {
		return err
	}
	var resp csiv0.ProbeResponse
	if err := proto.Unmarshal(raw, &resp); err != nil {
		return backends.Errorf(backends.ClassUnavailable, "backend %q: the answer to /csi.v0.Identity/Probe is not a valid csi.v0.ProbeResponse: %v", name, err)
	}
	if r := resp.GetReady(); r != nil && !r.GetValue() {
		return backends.Errorf(backends.ClassUnavailable, "backend %q: Identity/Probe: the v0 driver reports ready=false (still starting up?)", name)
	}
	return nil
}

// nodeInfoFromV0 answers a v1 NodeGetInfo from a v0 driver: its NodeGetInfo (v0.3), or for a
// v0.2 driver, which has none (UNIMPLEMENTED), its NodeGetId: the node's ID, with no limit
// on volumes and no topology.
var nodeInfoFromV0 = rpc{call: func(ctx context.Context, b *Backend, _ []byte) ([]byte, error) {
	info, err := send[*csiv0.NodeGetInfoResponse](ctx, b, "/csi.v0.Node/NodeGetInfo", &csiv0.NodeGetInfoRequest{})
	if backends.ClassOf(err) == backends.ClassUnimplemented {
		id, err := send[*csiv0.NodeGetIdResponse](ctx, b, "/csi.v0.Node/NodeGetId", &csiv0.NodeGetIdRequest{})
		if err != nil {
			return nil, err
		}
		return proto.Marshal(&csi.NodeGetInfoResponse{NodeId: id.GetNodeId()})
	}
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&csi.NodeGetInfoResponse{NodeId: info.GetNodeId(), MaxVolumesPerNode: info.GetMaxVolumesPerNode(),
		AccessibleTopology: topologyToV1(info.GetAccessibleTopology())})
}}

func nodeInfoToV0(r *csi.NodeGetInfoResponse) *csiv0.NodeGetInfoResponse {
	return &csiv0.NodeGetInfoResponse{NodeId: r.GetNodeId(), MaxVolumesPerNode: r.GetMaxVolumesPerNode(),
		AccessibleTopology: topologyToV0(r.GetAccessibleTopology())}
}

// nodeIDToV0 answers a v0 NodeGetId from a v1 backend's NodeGetInfo.
func nodeIDToV0(r *csi.NodeGetInfoResponse) *csiv0.NodeGetIdResponse {
	return &csiv0.NodeGetIdResponse{NodeId: r.GetNodeId()}
}
