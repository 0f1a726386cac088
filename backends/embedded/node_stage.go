package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeStageVolume attaches the volume's image to a loop device. A mount volume gets an ext4
// file system on first stage (a blank image only), which a read-write stage grows to the size
// of the device before mounting it on staging_target_path, so a volume expanded, cloned or
// restored larger than its source shows its full size (growing offline needs no capability
// beyond root's, unlike growing a mounted file system). A block volume's device is
// bind-mounted onto a file named after the volume in staging_target_path: the stage is then
// visible in the mount table per path, survives a restart of this process and is gone after
// a reboot, like the loop device.
// The "readonly" publish_context entry, or "ro" among the mount flags, stages read-only.
//
// Staged already with the same capability: OK. Staged at that path otherwise: ALREADY_EXISTS.
func (n *nodeService) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, c := req.GetVolumeId(), req.GetVolumeCapability()
	tools := []string{"losetup"}
	if !isBlock(c) {
		tools = append(tools, "blkid", "mkfs.ext4", "e2fsck", "resize2fs")
	}
	m, err := n.beginMount(ctx, id, c, req.GetPublishContext(), tools,
		checkVolumeAt(id, "staging_target_path", req.GetStagingTargetPath()))
	if err != nil {
		return nil, err
	}
	defer m.unlock()
	staging := resolvePath(req.GetStagingTargetPath())
	switch kind, err := existsAs(staging); {
	case err != nil:
		return nil, nodeStatus(err)
	case kind == "":
		return nil, status.Errorf(codes.FailedPrecondition, "staging_target_path %q does not exist; the CO creates that directory before NodeStageVolume", staging)
	case kind != "dir":
		return nil, status.Errorf(codes.FailedPrecondition, "staging_target_path %q is not a directory; CSI requires one", staging)
	}
	use := nodeUse{capability: c, readonly: m.askedRO}
	if isBlock(c) {
		err = n.stageBlock(ctx, m.vol, staging, use)
	} else {
		err = n.stageMount(ctx, m.vol, staging, use, m.opts)
	}
	if err != nil {
		return nil, nodeStatus(err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n *nodeService) stageMount(ctx context.Context, vol nodeVolume, staging string, use nodeUse, opts mountOptions) (err error) {
	tab, devs, err := n.snapshot(ctx, vol)
	if err != nil {
		return err
	}
	if done, err := n.stagedAlready(tab, devs, vol.id, staging, use); done {
		return err
	}
	dev, err := n.loopFor(ctx, vol.image, false)
	if err != nil {
		return err
	}
	defer n.releaseOnError(ctx, vol.image, &err)

	fsType, ptType, err := n.probeFS(ctx, dev.path)
	switch {
	case err != nil:
		return err
	case fsType == "" && ptType != "":
		return status.Errorf(codes.FailedPrecondition, "volume %s holds a %s partition table and no file system; this node service formats only blank volumes", vol.id, ptType)
	case fsType == "" && use.readonly:
		return status.Errorf(codes.FailedPrecondition, "volume %s has no file system yet and is to be staged read-only; stage it read-write once to create the file system", vol.id)
	case fsType == "":
		if err := n.makeFS(ctx, dev.path); err != nil {
			return err
		}
	case fsType != "ext4":
		return status.Errorf(codes.FailedPrecondition, "volume %s holds a %s file system; this appliance mounts ext4 only", vol.id, fsType)
	}
	if !use.readonly {
		if err := n.growToDevice(ctx, dev); err != nil {
			return err
		}
	}
	if err := mountFS(dev.path, staging, "ext4", opts.withReadonly(use.readonly)); err != nil {
		if opts.data != "" && isInvalidArgument(err) {
			return invalid("volume_capability.mount.mount_flags: the kernel refused to mount ext4 with %q (%v); pass options ext4 accepts", opts.data, err)
		}
		return err
	}
	n.records.setStage(vol.id, staging, use)
	return nil
}

func (n *nodeService) stageBlock(ctx context.Context, vol nodeVolume, staging string, use nodeUse) (err error) {
	tab, devs, err := n.snapshot(ctx, vol)
	if err != nil {
		return err
	}
	if done, err := n.stagedAlready(tab, devs, vol.id, staging, use); done {
		return err
	}
	file := filepath.Join(staging, blockFileName(vol.id)) // IDs of existing volumes are one path element
	if m := tab.top(file); m != nil {
		return status.Errorf(codes.AlreadyExists, "%q already has %s mounted, which is not volume %s; unmount it first", file, m.Source, vol.id)
	}
	dev, err := n.loopFor(ctx, vol.image, use.readonly)
	if err != nil {
		return err
	}
	defer n.releaseOnError(ctx, vol.image, &err)

	switch kind, err := existsAs(file); {
	case err != nil:
		return err
	case kind == "":
		f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600)
		if err != nil {
			return fmt.Errorf("create %s for the device: %w", file, err)
		}
		f.Close()
		defer func() {
			if err != nil {
				os.Remove(file)
			}
		}()
	case kind != "file":
		return status.Errorf(codes.AlreadyExists, "%q exists and is not a regular file; this node service binds volume %s's device there, so remove it first", file, vol.id)
	}
	if err := bindMount(dev.path, file, mountOptions{}.withReadonly(use.readonly)); err != nil {
		return err
	}
	n.records.setStage(vol.id, staging, use)
	return nil
}

// growToDevice grows the unmounted file system on dev when it is smaller than dev.
func (n *nodeService) growToDevice(ctx context.Context, dev loopDevice) error {
	fs, err := fsSize(dev.path)
	if err != nil {
		return err
	}
	size, err := loopSize(dev)
	if err != nil || fs >= size {
		return err
	}
	return n.growOffline(ctx, dev.path)
}

// snapshot reads the mount table and the loop devices of vol's image.
func (n *nodeService) snapshot(ctx context.Context, vol nodeVolume) (mountTable, []loopDevice, error) {
	tab, err := readMountTable()
	if err != nil {
		return nil, nil, err
	}
	devs, err := n.loopsOf(ctx, vol.image)
	return tab, devs, err
}

// stagedAlready settles a NodeStageVolume that finds something at staging already: done is
// true when it found something, and err is then nil (staged identically: OK) or the status
// to return.
func (n *nodeService) stagedAlready(tab mountTable, devs []loopDevice, id, staging string, want nodeUse) (done bool, err error) {
	if m := tab.top(staging); m != nil {
		if _, _, ok := tab.fileSystemAt(staging, devs); !ok {
			return true, status.Errorf(codes.AlreadyExists, "staging_target_path %q already has %s (%s) mounted, which is not volume %s; unstage that first", staging, m.Source, m.FSType, id)
		}
		return true, n.sameStage(id, staging, want, false, readOnlyMount(m))
	}
	if d, _, ok := tab.deviceAt(filepath.Join(staging, blockFileName(id)), devs); ok {
		return true, n.sameStage(id, staging, want, true, d.readonly)
	}
	return false, nil
}

// sameStage compares a repeated NodeStageVolume with the stage found at path: with what this
// process recorded, or, for a stage made before it started, with what the kernel shows
// (access type and read-only), adopting it when they agree.
func (n *nodeService) sameStage(id, path string, want nodeUse, block, readonly bool) error {
	if had, ok := n.records.stage(id, path); ok {
		if had.same(want) {
			return nil
		}
		return status.Errorf(codes.AlreadyExists, "volume %s is already staged at %q as %s; unstage it before staging it as %s", id, path, had, want)
	}
	if block != isBlock(want.capability) || readonly != want.readonly {
		return status.Errorf(codes.AlreadyExists, "volume %s is already staged at %q as %s; unstage it before staging it as %s", id, path, describeAccess(block, readonly), want)
	}
	n.records.setStage(id, path, want)
	return nil
}

// releaseOnError detaches the loop devices of image that nothing uses when *err is set: a
// failed stage or publish leaves no device behind.
func (n *nodeService) releaseOnError(ctx context.Context, image string, err *error) {
	if *err == nil {
		return
	}
	if rerr := n.releaseLoops(ctx, image); rerr != nil {
		n.a.log.Warn("node: a loop device of a failed call stays attached", "image", image, "error", rerr)
	}
}

// NodeUnstageVolume undoes NodeStageVolume: it unmounts the volume's file system from
// staging_target_path, or the device from the file in it (and removes that file), and
// detaches the loop devices no publication still uses. A volume not staged there, or one
// that no longer exists, is OK: there is nothing left to undo, and NOT_FOUND would make a CO
// retry forever (REQUIREMENTS §8.8).
func (n *nodeService) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	return respond(&csi.NodeUnstageVolumeResponse{}, n.undo(ctx, req.GetVolumeId(), "staging_target_path", req.GetStagingTargetPath(), n.unstage, n.records.dropStage))
}

func (n *nodeService) unstage(ctx context.Context, tab mountTable, id, staging string) error {
	// Only this appliance's file systems are unmounted from the staging directory itself:
	// NodeStageVolume refuses to stage over anything else, so anything else is not ours.
	ours := func(m *mountinfo.Info) bool { _, ok := n.loopByNumber(m.Major, m.Minor); return ok }
	devs := n.loopsAt(tab, staging)
	image := ""
	if name := blockFileName(id); name != "" {
		image = n.a.images.volumePath(id)
		file := filepath.Join(staging, name)
		devs = append(devs, n.loopsAt(tab, file)...)
		if err := unmountWhile(file, nil); err != nil {
			return err
		}
		if kind, err := existsAs(file); err == nil && kind == "file" {
			if err := os.Remove(file); err != nil {
				return err
			}
		}
	}
	if err := unmountWhile(staging, ours); err != nil {
		return err
	}
	return n.releaseLoops(ctx, image, devs...)
}

// describeAccess names an access type and read-only-ness, for messages.
func describeAccess(block, readonly bool) string {
	if readonly {
		return "read-only " + accessName(block)
	}
	return "read-write " + accessName(block)
}

func accessName(block bool) string {
	if block {
		return "a block device"
	}
	return "an ext4 file system"
}
