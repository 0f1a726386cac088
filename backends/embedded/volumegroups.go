package embedded

import "github.com/csi-addons/spec/lib/go/volumegroup"

// volumeGroupServer is the csi-addons VolumeGroup controller.
type volumeGroupServer struct {
	volumegroup.UnimplementedControllerServer
	a *Appliance
}
