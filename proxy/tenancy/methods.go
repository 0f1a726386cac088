package tenancy

// Full method names tenancy treats specially; every other method only has its references
// scoped.
const (
	createVolume              = "/csi.v1.Controller/CreateVolume"
	deleteVolume              = "/csi.v1.Controller/DeleteVolume"
	expandVolume              = "/csi.v1.Controller/ControllerExpandVolume"
	getVolume                 = "/csi.v1.Controller/ControllerGetVolume"
	getCapacity               = "/csi.v1.Controller/GetCapacity"
	listVolumes               = "/csi.v1.Controller/ListVolumes"
	listVolumeHealth          = "/csi.v1.Controller/ControllerListVolumeHealth"
	getVolumeHealth           = "/csi.v1.Controller/ControllerGetVolumeHealth"
	createSnapshot            = "/csi.v1.Controller/CreateSnapshot"
	deleteSnapshot            = "/csi.v1.Controller/DeleteSnapshot"
	getSnapshot               = "/csi.v1.Controller/GetSnapshot"
	listSnapshots             = "/csi.v1.Controller/ListSnapshots"
	createVolumeGroupSnapshot = "/csi.v1.GroupController/CreateVolumeGroupSnapshot"
	deleteVolumeGroupSnapshot = "/csi.v1.GroupController/DeleteVolumeGroupSnapshot"
	createVolumeGroup         = "/volumegroup.Controller/CreateVolumeGroup"
	deleteVolumeGroup         = "/volumegroup.Controller/DeleteVolumeGroup"
	getVolumeGroup            = "/volumegroup.Controller/ControllerGetVolumeGroup"
	listVolumeGroups          = "/volumegroup.Controller/ListVolumeGroups"
	getVolumeGroupSnapshot    = "/csi.v1.GroupController/GetVolumeGroupSnapshot"
	controllerUnpublishVolume = "/csi.v1.Controller/ControllerUnpublishVolume"
	nodeUnstageVolume         = "/csi.v1.Node/NodeUnstageVolume"
	nodeUnpublishVolume       = "/csi.v1.Node/NodeUnpublishVolume"
)

// behaviour is what a method does to the objects tenancy keeps track of.
type behaviour struct {
	// creates are the kinds of the objects a successful call creates, the named one first:
	// its request's name field is scoped, and the objects its response names are recorded
	// as the tenant's.
	creates []Kind
	// deletes is the kind of object the call deletes: when the tenant does not own it, the
	// call is OK without reaching the backend, as a delete of an absent object is.
	deletes Kind
	// lists is the kind of object a List call returns: entries of other tenants' objects are
	// left out, and a filter naming an object the tenant does not own matches nothing.
	lists Kind
	// absentOK calls are OK for an object the tenant does not own, as the gateway's error
	// table answers them for an absent one: a volume unknown to the backend is neither
	// published nor staged, and NOT_FOUND would keep Kubernetes retrying the detach forever.
	absentOK bool
}

var behaviours = map[string]behaviour{
	createVolume:              {creates: []Kind{Volume}},
	createSnapshot:            {creates: []Kind{Snapshot}},
	createVolumeGroupSnapshot: {creates: []Kind{GroupSnapshot, Snapshot}},
	createVolumeGroup:         {creates: []Kind{VolumeGroup}},
	deleteVolume:              {deletes: Volume},
	deleteSnapshot:            {deletes: Snapshot},
	deleteVolumeGroupSnapshot: {deletes: GroupSnapshot},
	deleteVolumeGroup:         {deletes: VolumeGroup},
	listVolumes:               {lists: Volume},
	listVolumeHealth:          {lists: Volume},
	listSnapshots:             {lists: Snapshot},
	listVolumeGroups:          {lists: VolumeGroup},
	controllerUnpublishVolume: {absentOK: true},
	nodeUnstageVolume:         {absentOK: true},
	nodeUnpublishVolume:       {absentOK: true},
}
