package csp

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/backends"
)

// The publish_context keys of a CSP publication: those the HPE node plugin reads, so that
// a node side written for HPE CSPs can attach the volume. CHAP never goes here
// (publish_context is not a secret field: Kubernetes keeps it in VolumeAttachment status).
const (
	ctxSerialNumber   = "serialNumber"
	ctxAccessProtocol = "accessProtocol"
	ctxTargetNames    = "targetNames"
	ctxLunID          = "lunId"
	ctxDiscoveryIPs   = "discoveryIps"
	ctxReadOnly       = "readOnly"
	ctxFsType         = "fsType"
)

// controllerPublishVolume registers the node with the CSP as a host (an upsert by uuid, the
// CSI node ID, with the node's initiators) and publishes the volume to it.
func (b *Backend) controllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	rpc := "ControllerPublishVolume"
	nodeID, volID := req.GetNodeId(), req.GetVolumeId()
	node, err := b.node(rpc, nodeID)
	if err != nil {
		return nil, err
	}
	protocol := b.cfg.AccessProtocol
	if p := req.GetVolumeContext()[paramAccessProtocol]; p != "" {
		protocol = p
	}
	publish := request{rpc: rpc, method: http.MethodPut, path: "/volumes/" + url.PathEscape(volID) + "/actions/publish",
		body: publishOptions{HostUUID: nodeID, AccessProtocol: protocol}, idempotent: true}
	var info publishInfo
	for attempt := 0; ; attempt++ {
		if err := b.registerHost(ctx, rpc, nodeID, node); err != nil {
			return nil, err
		}
		a, err := b.do(ctx, publish, &info)
		switch {
		case err != nil:
			return nil, err
		case a.status == http.StatusOK:
			return &csi.ControllerPublishVolumeResponse{PublishContext: publishContext(info, req)}, nil
		case a.notFound(b.profile):
			// The volume, or the host: the host is registered again once, as the HPE driver does.
			if _, err := b.mustGetVolume(ctx, rpc, volID); err != nil {
				return nil, err
			}
			if attempt == 0 {
				continue
			}
			return nil, b.errorf(backends.ClassNotFound, rpc, "the CSP does not find host %q, though it was just registered", nodeID)
		}
		return nil, b.classify(rpc, a)
	}
}

// node returns the initiators of a node: from LookupNode (the node registry), else from the
// static Nodes; NOT_FOUND when neither knows the node.
func (b *Backend) node(rpc, nodeID string) (Node, error) {
	if b.cfg.LookupNode != nil {
		n, found, err := b.cfg.LookupNode(nodeID)
		if err != nil {
			return Node{}, b.errorf(backends.ClassUnavailable, rpc, "reading the initiators of node %q: %v", nodeID, err)
		}
		if found {
			return n, nil
		}
	}
	if n, ok := b.cfg.Nodes[nodeID]; ok {
		return n, nil
	}
	return Node{}, b.errorf(backends.ClassNotFound, rpc, "node %q is not known: no initiators for it in backends.%s.csp.nodeRegistry or csp.nodes", nodeID, b.name)
}

// registerHost upserts the node as a CSP host.
func (b *Backend) registerHost(ctx context.Context, rpc, nodeID string, n Node) error {
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPost, path: "/hosts", idempotent: true, body: host{
		UUID: nodeID, Name: nodeID, IQNs: n.IQNs, WWPNs: n.WWPNs, NQNs: n.NQNs, Networks: n.Networks,
	}}, nil)
	if err != nil {
		return err
	}
	if a.status/100 != 2 {
		return b.classify(rpc, a)
	}
	return nil
}

// publishContext is what the node side needs to attach the volume.
func publishContext(info publishInfo, req *csi.ControllerPublishVolumeRequest) map[string]string {
	pc := map[string]string{
		ctxSerialNumber:   info.SerialNumber,
		ctxAccessProtocol: info.AccessProtocol,
		ctxLunID:          strconv.FormatInt(int64(info.LunID), 10),
	}
	if len(info.TargetNames) > 0 {
		pc[ctxTargetNames] = strings.Join(info.TargetNames, ",")
	}
	if len(info.DiscoveryIPs) > 0 {
		pc[ctxDiscoveryIPs] = strings.Join(info.DiscoveryIPs, ",")
	}
	if req.GetReadonly() {
		pc[ctxReadOnly] = "true"
	}
	if fs := req.GetVolumeCapability().GetMount().GetFsType(); fs != "" {
		pc[ctxFsType] = fs
	}
	return pc
}

// controllerUnpublishVolume unpublishes the volume from one host, or from every host the CSP
// knows when node_id is empty. A volume or host the CSP no longer knows is unpublished.
func (b *Backend) controllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	rpc := "ControllerUnpublishVolume"
	nodes := []string{req.GetNodeId()}
	if req.GetNodeId() == "" {
		var hosts []host
		if _, err := b.get(ctx, rpc, "/hosts", nil, &hosts); err != nil {
			return nil, err
		}
		nodes = nodes[:0]
		for _, h := range hosts {
			nodes = append(nodes, h.UUID)
		}
	}
	for _, n := range nodes {
		a, err := b.do(ctx, request{rpc: rpc, method: http.MethodPut, idempotent: true,
			path: "/volumes/" + url.PathEscape(req.GetVolumeId()) + "/actions/unpublish", body: publishOptions{HostUUID: n}}, nil)
		if err != nil {
			return nil, err
		}
		if a.status/100 != 2 && !a.notFound(b.profile) {
			return nil, b.classify(rpc, a)
		}
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}
