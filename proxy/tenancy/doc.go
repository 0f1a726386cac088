// Package tenancy keeps the tenants of a shared gateway apart.
//
// A central gateway serves several clusters (tenants) from one backend. Each tenant sees only
// its own volumes, snapshots, group snapshots and volume groups, under names and IDs of its
// own:
//
//   - Names a tenant creates objects with are sent to the backend as "TENANT.NAME", so two
//     tenants may both create "pvc-1" without meeting (ScopeName).
//   - IDs the backend returns reach the tenant as "TENANT.ID" and are turned back on the way
//     in (ScopeID, UnscopeID). The encoding is stable and reversible; tenant names cannot
//     contain the separator, so no two tenants' scoped strings can coincide.
//   - Who owns which backend object is recorded in a Ledger when the object is created and
//     forgotten when it is deleted. An ID the calling tenant does not own is NOT_FOUND (a
//     delete of it is OK, as for any absent object) and is never forwarded, so another
//     tenant's objects are neither reached nor revealed, even to a caller who guesses a
//     backend ID. The Ledger keeps its state in a Store: a bbolt file for one central gateway
//     (OpenBolt), or etcd for any number of replicas (OpenEtcd), where every change is a
//     transaction. A create's quota hold outlives the process or replica that took it until
//     the name's retry records the volume (CreateHolds lists them, ReleaseCreateHold deletes
//     one); `ledger migrate` fences an etcd ledger against every replica's writes (Fence).
//   - List calls return only the tenant's entries, page by page, with the backend's own
//     pagination tokens sealed (AES-GCM) for the tenant and the listing: they stay valid as
//     long as the backend's do, reveal nothing of other tenants, and another tenant's token,
//     or one changed by a bit, is ABORTED. ListVolumes, ListSnapshots, ListVolumeGroups and
//     ControllerListVolumeHealth read the tenant's objects from the ledger's per-tenant index
//     and each one's state from the backend (one get call each), so their cost is the
//     tenant's own objects, not every tenant's (listOwned, ownedListings); their tokens are
//     sealed positions in that index.
//   - Quotas per tenant bound the number of volumes and their total bytes
//     (RESOURCE_EXHAUSTED), and GetCapacity reports no more than the quota has left.
//
// The package works on decoded messages through protobuf reflection: any field named
// volume_id, snapshot_id, group_snapshot_id or volume_group_id (and their plural and
// source_/base_/target_ forms) is an object reference, so every CSI, GroupController,
// SnapshotMetadata and csi-addons VolumeGroup method is scoped by the same rules.
package tenancy
