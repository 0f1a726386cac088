package embedded

import "github.com/container-storage-interface/spec/lib/go/csi"

// nodeService is the CSI Node service.
type nodeService struct {
	csi.UnimplementedNodeServer
	a *Appliance
}

func newNodeService(a *Appliance) *nodeService { return &nodeService{a: a} }
