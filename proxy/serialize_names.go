package proxy

import (
	"context"

	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// createdUnder is, for each delete that is serialized, the kind of its object in the tenancy
// ledger and the serializer's kind of the name the object was created under.
var createdUnder = map[string]struct {
	ledger tenancy.Kind
	name   objectKind
}{
	"/csi.v1.Controller/DeleteVolume":                   {tenancy.Volume, kindVolumeName},
	"/csi.v1.Controller/DeleteSnapshot":                 {tenancy.Snapshot, kindSnapshotName},
	"/csi.v1.GroupController/DeleteVolumeGroupSnapshot": {tenancy.GroupSnapshot, kindGroupSnapshotName},
	"/volumegroup.Controller/DeleteVolumeGroup":         {tenancy.VolumeGroup, kindVolumeGroupName},
}

// nameLock is the store's lock a tenant's delete takes besides its object's: that of the
// name the object was created under, as the create of that name takes it. A create is keyed
// by its name and a delete by the object's ID, so without it a create of a name could run
// beside the delete of the volume created under it — on two replicas, or on one — and either
// record a volume the delete has just removed (a ledger entry of nothing) or, the delete
// done, create the volume anew (it was a retry when it started). ok is false when the delete
// has no such lock: the tenant owns no such object, or its name cannot be told — a name too
// long to take the tenant's prefix whole, recorded before records kept it
// (tenancy.Ledger.CreatedAs).
func nameLock(ctx context.Context, ledger *tenancy.Ledger, tenant string, op *operation, lock tenancy.Operation) (tenancy.Operation, bool, error) {
	k, ok := createdUnder[op.method]
	if !ok {
		return tenancy.Operation{}, false, nil
	}
	name, ok, err := ledger.CreatedAs(ctx, tenant, k.ledger, op.id)
	if !ok || err != nil {
		return tenancy.Operation{}, false, err
	}
	lock.Object = objectKey(tenant, k.name, name)
	return lock, true, nil
}
