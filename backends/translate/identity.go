package translate

import (
	"context"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// Identity and node identity: plugin info and Probe have the same fields in both versions
// and cross as they are (a v0.2 driver's empty ProbeResponse reads as ready, as v1 says of
// an unset ready).

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

// orNodeGetID is v1's NodeGetInfo on a v0 driver: its NodeGetInfo (v0.3, through info),
// or for a v0.2 driver, which has none (UNIMPLEMENTED), its NodeGetId: the node's ID, with
// no limit on volumes and no topology.
func orNodeGetID(info rpc) rpc {
	return rpc{call: func(ctx context.Context, b *Backend, raw []byte) ([]byte, error) {
		resp, err := info.call(ctx, b, raw)
		if backends.ClassOf(err) != backends.ClassUnimplemented {
			return resp, err
		}
		var id csiv0.NodeGetIdResponse
		if err := send(ctx, b, "/csi.v0.Node/NodeGetId", &csiv0.NodeGetIdRequest{}, &id); err != nil {
			return nil, err
		}
		return proto.Marshal(&csi.NodeGetInfoResponse{NodeId: id.GetNodeId()})
	}}
}

func nodeInfoToV1(r *csiv0.NodeGetInfoResponse) *csi.NodeGetInfoResponse {
	out := crossed[*csi.NodeGetInfoResponse](r)
	out.AccessibleTopology = topologyToV1(r.GetAccessibleTopology())
	return out
}

func nodeInfoToV0(r *csi.NodeGetInfoResponse) *csiv0.NodeGetInfoResponse {
	out := crossed[*csiv0.NodeGetInfoResponse](r)
	out.AccessibleTopology = topologyToV0(r.GetAccessibleTopology())
	return out
}
