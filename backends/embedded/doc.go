// Package embedded is the reference appliance: a durable, file-backed CSI storage service.
//
// Volumes are sparse image files under a data directory (block volumes are used raw,
// filesystem volumes carry an ext4 file system made on first stage), snapshots are copies of
// those files, and all bookkeeping — volumes, snapshots, groups, group snapshots and
// controller publications — lives in one JSON state file that is replaced atomically on every
// change. A crash at any moment loses nothing that was acknowledged and leaves no orphan file:
// data files are written before the state that names them, and files that no state names are
// removed when the appliance opens its data directory.
//
// It implements the CSI Identity, Controller, GroupController and Node services and the
// csi-addons VolumeGroup controller, with the idempotency rules and error codes each RPC's
// section of the CSI spec requires. Node calls mount for real (bind mounts, loop devices) and
// fail with FAILED_PRECONDITION when the process cannot mount; they never pretend.
//
// An Appliance is safe for concurrent use. It refuses to be a gateway: it knows nothing of
// routing, tenants or other backends.
package embedded
