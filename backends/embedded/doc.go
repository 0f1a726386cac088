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
// Health is reported from what the appliance can observe: the controller checks each volume's
// image (present, readable, as large as recorded), the node checks that a volume is still
// mounted, from a loop device of its image, where it was staged or published, and that the
// data directory's file system is reachable, writable and roomy enough for the sparse images.
//
// An Appliance is safe for concurrent use. It refuses to be a gateway: it knows nothing of
// routing, tenants or other backends.
package embedded
