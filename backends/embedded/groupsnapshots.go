package embedded

import "github.com/container-storage-interface/spec/lib/go/csi"

// groupControllerServer is the CSI GroupController service.
type groupControllerServer struct {
	csi.UnimplementedGroupControllerServer
	a *Appliance
}
