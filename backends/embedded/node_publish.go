package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// NodePublishVolume makes a staged volume available at target_path, which it creates: a
// directory onto which the staged file system is bind-mounted, or a file onto which the
// staged device is. The publication is read-only when readonly is set, when the access mode
// is a reader-only one, when the publish_context says so, or when the stage is read-only; a
// read-only block publication gets a read-only loop device of its own, since a read-only
// bind mount does not stop writes to a device node.
//
// Published at target_path already with the same capability and read-only-ness: OK; with
// others: ALREADY_EXISTS. Published at another target path while the access mode allows one
// per node, or with a different capability: FAILED_PRECONDITION (the second table of the
// spec's NodePublishVolume section). Not staged: FAILED_PRECONDITION.
func (n *nodeService) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, c := req.GetVolumeId(), req.GetVolumeCapability()
	m, err := n.beginMount(ctx, id, c, req.GetPublishContext(), []string{"losetup"},
		checkVolumeAt(id, "target_path", req.GetTargetPath()),
		stagedFirst(req.GetStagingTargetPath()),
		checkNodePath("staging_target_path", req.GetStagingTargetPath()))
	if err != nil {
		return nil, err
	}
	defer m.unlock()
	p := publishRequest{
		vol:     m.vol,
		staging: resolvePath(req.GetStagingTargetPath()),
		target:  resolvePath(req.GetTargetPath()),
		use: nodeUse{
			capability: c,
			readonly:   req.GetReadonly() || m.askedRO || isReadOnlyMode(c.GetAccessMode().GetMode()),
		},
		opts: m.opts,
	}
	if p.tab, p.devs, err = n.snapshot(ctx, m.vol); err != nil {
		return nil, nodeStatus(err)
	}
	if isBlock(c) {
		err = n.publishBlock(ctx, p)
	} else {
		err = n.publishMount(p)
	}
	if err != nil {
		return nil, nodeStatus(err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// stagedFirst fails with FAILED_PRECONDITION when a NodePublishVolume names no
// staging_target_path: this node service stages volumes.
func stagedFirst(staging string) error {
	if staging == "" {
		return status.Error(codes.FailedPrecondition, "staging_target_path is required: this node service stages volumes (STAGE_UNSTAGE_VOLUME), so call NodeStageVolume first and pass its staging_target_path")
	}
	return nil
}

// publishRequest is one NodePublishVolume call, with the mount table and the volume's loop
// devices as they were when it began.
type publishRequest struct {
	vol             nodeVolume
	staging, target string
	use             nodeUse
	opts            mountOptions
	tab             mountTable
	devs            []loopDevice
}

func (p publishRequest) blockFile() string {
	return filepath.Join(p.staging, blockFileName(p.vol.id))
}

func (n *nodeService) publishMount(p publishRequest) error {
	_, staged, ok := p.tab.fileSystemAt(p.staging, p.devs)
	if !ok {
		if err := p.publishedOtherwise(); err != nil {
			return err
		}
		if _, _, ok := p.tab.deviceAt(p.blockFile(), p.devs); ok {
			return status.Errorf(codes.FailedPrecondition, "volume %s is staged at %q as a block device; publish it with a block capability, or unstage it and stage it with a mount capability", p.vol.id, p.staging)
		}
		return p.notStaged()
	}
	p.use.readonly = p.use.readonly || readOnlyMount(staged)
	done, created, err := n.newTarget(p, "dir")
	if done || err != nil {
		return err
	}
	if err := bindMount(p.staging, p.target, p.opts.withReadonly(p.use.readonly)); err != nil {
		if created {
			os.Remove(p.target)
		}
		return err
	}
	n.records.setPublication(p.vol.id, p.target, p.use)
	return nil
}

func (n *nodeService) publishBlock(ctx context.Context, p publishRequest) (err error) {
	staged, _, ok := p.tab.deviceAt(p.blockFile(), p.devs)
	if !ok {
		if err := p.publishedOtherwise(); err != nil {
			return err
		}
		if _, _, ok := p.tab.fileSystemAt(p.staging, p.devs); ok {
			return status.Errorf(codes.FailedPrecondition, "volume %s is staged at %q as a file system; publish it with a mount capability, or unstage it and stage it with a block capability", p.vol.id, p.staging)
		}
		return p.notStaged()
	}
	p.use.readonly = p.use.readonly || staged.readonly
	done, created, err := n.newTarget(p, "file")
	if done || err != nil {
		return err
	}
	defer func() {
		if err != nil && created {
			os.Remove(p.target)
		}
	}()
	dev := staged
	if p.use.readonly && !staged.readonly {
		if dev, err = n.loopFor(ctx, p.vol.image, true); err != nil {
			return err
		}
		defer n.releaseOnError(ctx, p.vol.image, &err)
	}
	if err := bindMount(dev.path, p.target, mountOptions{}.withReadonly(p.use.readonly)); err != nil {
		return err
	}
	n.records.setPublication(p.vol.id, p.target, p.use)
	return nil
}

// newTarget does what a publication does once it knows the volume is staged for it: it
// answers one already there with the same use (done, with publishedAlready's error), refuses
// one that conflicts with the volume's other targets, and creates the target, a kind
// ("dir" or "file"), saying whether it did (created).
func (n *nodeService) newTarget(p publishRequest, kind string) (done, created bool, err error) {
	if done, err := n.publishedAlready(p); done {
		return true, false, err
	}
	if err := n.checkOtherTargets(p); err != nil {
		return false, false, err
	}
	created, err = makeTarget(p.target, kind)
	return false, created, err
}

// publishedOtherwise fails with ALREADY_EXISTS when the volume is published at the target
// already with the other access type: a request the volume's stage cannot serve, but the
// first thing wrong with it is that the target is taken.
func (p publishRequest) publishedOtherwise() error {
	if _, m, ok := p.tab.fileSystemAt(p.target, p.devs); ok {
		return status.Errorf(codes.AlreadyExists, "volume %s is already published at %q as %s; unpublish it before publishing it there as %s", p.vol.id, p.target, describeAccess(false, readOnlyMount(m)), p.use)
	}
	if d, _, ok := p.tab.deviceAt(p.target, p.devs); ok {
		return status.Errorf(codes.AlreadyExists, "volume %s is already published at %q as %s; unpublish it before publishing it there as %s", p.vol.id, p.target, describeAccess(true, d.readonly), p.use)
	}
	return nil
}

func (p publishRequest) notStaged() error {
	return status.Errorf(codes.FailedPrecondition, "volume %s is not staged at staging_target_path %q; call NodeStageVolume with that path first", p.vol.id, p.staging)
}

// publishedAlready settles a NodePublishVolume that finds something at target_path already:
// done is true when it found something, and err is then nil (published compatibly: OK) or
// the status to return.
func (n *nodeService) publishedAlready(p publishRequest) (done bool, err error) {
	m := p.tab.top(p.target)
	if m == nil {
		return false, nil
	}
	if _, _, ok := p.tab.fileSystemAt(p.target, p.devs); ok {
		return true, n.samePublication(p, false, readOnlyMount(m))
	}
	if d, _, ok := p.tab.deviceAt(p.target, p.devs); ok {
		return true, n.samePublication(p, true, d.readonly)
	}
	return true, status.Errorf(codes.AlreadyExists, "target_path %q already has %s (%s) mounted, which is not volume %s; unpublish that first", p.target, m.Source, m.FSType, p.vol.id)
}

// samePublication compares a repeated NodePublishVolume with the publication found at its
// target: with what this process recorded, or, for a publication made before it started,
// with what the kernel shows (access type and read-only), adopting it when they agree.
func (n *nodeService) samePublication(p publishRequest, block, readonly bool) error {
	if had, ok := n.records.publication(p.vol.id, p.target); ok {
		if had.same(p.use) {
			return nil
		}
		return status.Errorf(codes.AlreadyExists, "volume %s is already published at %q as %s; unpublish it before publishing it there as %s", p.vol.id, p.target, had, p.use)
	}
	if block != isBlock(p.use.capability) || readonly != p.use.readonly {
		return status.Errorf(codes.AlreadyExists, "volume %s is already published at %q as %s; unpublish it before publishing it there as %s", p.vol.id, p.target, describeAccess(block, readonly), p.use)
	}
	n.records.setPublication(p.vol.id, p.target, p.use)
	return nil
}

// checkOtherTargets applies the spec's rules for a volume published at another target path
// of this node: only SINGLE_NODE_MULTI_WRITER and the MULTI_NODE modes allow it, on both
// sides, and with the same capability.
func (n *nodeService) checkOtherTargets(p publishRequest) error {
	mode := p.use.capability.GetAccessMode().GetMode()
	for _, other := range p.tab.mountPointsOf(p.devs, p.staging, p.blockFile(), p.target) {
		if !allowsManyTargets(mode) {
			return status.Errorf(codes.FailedPrecondition, "volume %s is already published at %q and access mode %s allows one target path per node; unpublish it there first, or use SINGLE_NODE_MULTI_WRITER", p.vol.id, other, mode)
		}
		had, ok := n.records.publication(p.vol.id, other)
		if !ok {
			continue // published before this process started: the kernel does not show how
		}
		if m := had.capability.GetAccessMode().GetMode(); !allowsManyTargets(m) {
			return status.Errorf(codes.FailedPrecondition, "volume %s is already published at %q with access mode %s, which allows one target path per node; unpublish it there first", p.vol.id, other, m)
		}
		if !proto.Equal(had.capability, p.use.capability) {
			return status.Errorf(codes.FailedPrecondition, "volume %s is already published at %q with another volume_capability (%s); publish it with the same capability at every target path", p.vol.id, other, had)
		}
	}
	return nil
}

// makeTarget creates target_path as a "dir" or a "file" unless it is one already, and
// reports whether it created it. Its parent must exist: the CO creates that.
func makeTarget(target, kind string) (created bool, err error) {
	have, err := existsAs(target)
	switch {
	case err != nil:
		return false, err
	case have == kind:
		return false, nil
	case have != "":
		return false, status.Errorf(codes.AlreadyExists, "target_path %q exists and is not a %s as this volume's access type needs; remove it or use another target_path", target, map[string]string{"dir": "directory", "file": "regular file"}[kind])
	}
	if kind == "dir" {
		err = os.Mkdir(target, 0o750)
	} else {
		var f *os.File
		if f, err = os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600); err == nil {
			f.Close()
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, status.Errorf(codes.FailedPrecondition, "the parent directory of target_path %q does not exist; the CO creates it before NodePublishVolume", target)
	}
	if err != nil {
		return false, fmt.Errorf("create target_path: %w", err)
	}
	return true, nil
}

// NodeUnpublishVolume undoes NodePublishVolume: it unmounts everything mounted at
// target_path, stacked mounts included, deletes target_path and detaches a loop device
// that only this publication used. A volume not published there, or one that no longer
// exists, is OK (REQUIREMENTS §8.8: NOT_FOUND would make a CO retry forever). A directory
// that still holds files once unmounted is not deleted: FAILED_PRECONDITION.
func (n *nodeService) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return respond(&csi.NodeUnpublishVolumeResponse{}, n.undo(ctx, req.GetVolumeId(), "target_path", req.GetTargetPath(), n.unpublish, n.records.dropPublication))
}

func (n *nodeService) unpublish(ctx context.Context, tab mountTable, id, target string) error {
	devs := n.loopsAt(tab, target)
	if err := unmountWhile(target, nil); err != nil {
		return err
	}
	err := os.Remove(target)
	switch {
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		return status.Errorf(codes.FailedPrecondition, "target_path %q still holds files once unmounted, which this node service did not put there; remove them or the directory", target)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("remove target_path: %w", err)
	}
	image := ""
	if blockFileName(id) != "" {
		image = n.a.images.volumePath(id)
	}
	return n.releaseLoops(ctx, image, devs...)
}
