package embedded

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeGetVolumeHealth reports a volume's health as this node sees it: the image checks of
// ControllerGetVolumeHealth (the node reads the volume through its image), and for every
// place asked about, whether the volume is still there (its file system mounted, or its
// device bound, from a loop device still attached to its image) and, when it was staged or
// published read-write, whether it still is: ext4 remounts itself read-only after an I/O
// error, and a volume that did so is DEGRADED (BecameReadOnly).
//
// The places are staging_target_path and volume_publish_path when given. When neither is,
// they are where this process staged and published the volume; after a restart it has no
// such record (the kernel shows where a volume is, not where it ought to be) and reports on
// the image alone. A place where the volume is not found is INACCESSIBLE (NotStaged or
// NotPublished), not an error: the spec lets a CO ask about a volume whose stage or publish
// failed, to learn why. A volume the appliance does not have is NOT_FOUND; a path that is not
// absolute is INVALID_ARGUMENT.
//
// It waits for other calls on the volume, so a stage or unpublish half done is never reported
// as a problem. It mounts nothing and needs no root; it needs losetup to look for devices.
func (n *nodeService) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	id := req.GetVolumeId()
	if err := checkRequired("volume_id", id); err != nil {
		return nil, err
	}
	places := slices.DeleteFunc([]healthPlace{
		{field: "staging_target_path", path: req.GetStagingTargetPath(), staging: true},
		{field: "volume_publish_path", path: req.GetVolumePublishPath()},
	}, func(p healthPlace) bool { return p.path == "" })
	for _, p := range places {
		if err := checkNodePath(p.field, p.path); err != nil {
			return nil, err
		}
	}
	vol, unlock, err := n.lockedVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	h, err := n.a.imageHealth(id)
	if err != nil {
		return nil, err
	}
	if len(places) == 0 {
		places = n.recordedPlaces(id)
	}
	if len(places) > 0 {
		if _, err := n.tool("losetup"); err != nil {
			return nil, nodeStatus(err)
		}
	}
	for _, p := range places {
		if err := n.checkPlace(ctx, h, vol, p); err != nil {
			return nil, nodeStatus(err)
		}
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: h.proto()}, nil
}

// healthPlace is a path NodeGetVolumeHealth looks at.
type healthPlace struct {
	field   string // the request field it came from; "" for a recorded place
	path    string
	staging bool // a staging path rather than a target path
}

// recordedPlaces lists where this process staged and published volume id.
func (n *nodeService) recordedPlaces(id string) []healthPlace {
	staged, published := n.records.paths(id)
	var out []healthPlace
	for _, p := range staged {
		out = append(out, healthPlace{path: p, staging: true})
	}
	for _, p := range published {
		out = append(out, healthPlace{path: p})
	}
	return out
}

// Reasons of the node's view of a place, besides those of the image (health.go).
const (
	reasonNotStaged      = "NotStaged"
	reasonNotPublished   = "NotPublished"
	reasonBecameReadOnly = "BecameReadOnly"
)

// checkPlace adds to h what is wrong with vol at p. It fails only when it cannot look.
func (n *nodeService) checkPlace(ctx context.Context, h *healthReport, vol nodeVolume, p healthPlace) error {
	path := resolvePath(p.path)
	reason, verb, redo, recorded := reasonNotPublished, "published", "publish", n.records.publication
	if p.staging {
		reason, verb, redo, recorded = reasonNotStaged, "staged", "stage", n.records.stage
	}
	found, err := n.find(ctx, vol, path)
	if status.Code(err) == codes.NotFound {
		h.add(csi.VolumeHealthErrorType_INACCESSIBLE, reason, "volume %s is not %s at %q on this node: neither its file system nor its device is mounted there from a loop device of its image; %s it again", vol.id, verb, path, redo)
		return nil
	}
	if err != nil {
		return err
	}
	if use, ok := recorded(vol.id, path); ok && !use.readonly && found.readonly {
		h.add(csi.VolumeHealthErrorType_DEGRADED, reasonBecameReadOnly, "volume %s was %s read-write at %q and is read-only now (ext4 remounts itself read-only after an I/O error): reads work, writes fail; check the node's kernel log, then unpublish, unstage and stage it again", vol.id, verb, path)
	}
	return nil
}

// Reasons of NodeGetStorageHealth.
const (
	reasonDataDirUnreachable = "DataDirectoryUnreachable"
	reasonDataDirReadOnly    = "DataDirectoryReadOnly"
	reasonDataDirLowSpace    = "DataDirectoryLowSpace"
)

// NodeGetStorageHealth reports the health of this node's one storage backend, the file system
// that holds the data directory: STORAGE_UNREACHABLE when statfs fails on the directory;
// STORAGE_DEGRADED when the file system is mounted read-only (no volume can be written) or
// when it has less space free than the volumes' sparse images may still take (writes to
// volumes can fail with ENOSPC). Healthy storage reports no entries. No condition is
// particular to a volume capability, so volume_capability is left out.
//
// It mounts nothing and needs no root. Off Linux it is FAILED_PRECONDITION, like every call
// of this node service that touches the host.
func (n *nodeService) NodeGetStorageHealth(_ context.Context, req *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error) {
	if err := checkMap("secrets", req.GetSecrets()); err != nil {
		return nil, err
	}
	if err := platformCanMount(); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	out := &csi.NodeGetStorageHealthResponse{}
	add := func(st csi.StorageHealthErrorType, reason, format string, args ...any) {
		out.BackendHealth = append(out.BackendHealth, &csi.NodeGetStorageHealthResponse_StorageBackendHealth{
			Status: st, Reason: reason, Message: fmt.Sprintf(format, args...),
		})
	}
	dir := n.a.cfg.DataDir
	u, err := fsUsageAt(dir)
	if err != nil {
		add(csi.StorageHealthErrorType_STORAGE_UNREACHABLE, reasonDataDirUnreachable,
			"%v; check that the data directory %s exists and that its disk is attached", err, dir)
		return out, nil
	}
	if u.readonly {
		add(csi.StorageHealthErrorType_STORAGE_DEGRADED, reasonDataDirReadOnly,
			"the file system of the data directory %s is mounted read-only: no volume can be written, created or snapshotted; remount it read-write", dir)
	}
	if need := n.unallocatedBytes(); u.availBytes < need {
		add(csi.StorageHealthErrorType_STORAGE_DEGRADED, reasonDataDirLowSpace,
			"the file system of the data directory %s has %d bytes free, less than the %d the volumes' sparse images may still take: writes to volumes can fail with ENOSPC; free space there or grow the file system", dir, u.availBytes, need)
	}
	return out, nil
}

// unallocatedBytes is how many more bytes the volumes' sparse images may take on disk: their
// capacity less what they already hold. Images are examined without the state lock, from a
// copy of the records; one that is gone counts for nothing (NodeGetVolumeHealth reports it).
func (n *nodeService) unallocatedBytes() int64 {
	type image struct {
		path     string
		capacity int64
	}
	var images []image
	n.a.view(func(s *state) error {
		for id, v := range s.Volumes {
			images = append(images, image{n.a.images.volumePath(id), v.CapacityBytes})
		}
		return nil
	})
	var total int64
	for _, im := range images {
		var st unix.Stat_t
		if err := unix.Stat(im.path, &st); err != nil {
			continue
		}
		total += max(im.capacity-int64(st.Blocks)*512, 0) // st_blocks counts 512-byte units
	}
	return total
}
