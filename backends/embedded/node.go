package embedded

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nodeService is the CSI Node service of the appliance. NodeStageVolume attaches a volume's
// image to a loop device and either mounts it (an ext4 file system, made on first use) on the
// staging path or, for a block volume, bind-mounts the device onto a file in the staging
// directory; NodePublishVolume bind-mounts the staged file system or device onto the target.
//
// The kernel is the record of what is staged and published: the mount table and the loop
// devices say what exists, so a restart of the process loses nothing and a reboot leaves
// nothing stale. What the kernel cannot tell, the exact capability a stage or publish was made
// with, is remembered in memory (see nodeRecords) and only sharpens the idempotency checks.
//
// Calls for one volume run one at a time (locks); calls for different volumes run in parallel.
// The appliance's state lock is held only to read a volume's record, never while a tool runs.
// A process that cannot mount fails every call that must mount with FAILED_PRECONDITION; it
// never pretends. Safe for concurrent use.
type nodeService struct {
	csi.UnimplementedNodeServer
	a       *Appliance
	locks   *keyedLock
	records *nodeRecords

	// canMount says why this process cannot mount, or returns nil. Tests replace it.
	canMount func() error
	// lookPath finds an executable, like exec.LookPath. Tests replace it.
	lookPath func(name string) (string, error)
}

func newNodeService(a *Appliance) *nodeService {
	return &nodeService{
		a:        a,
		locks:    newKeyedLock(),
		records:  newNodeRecords(),
		canMount: euidCanMount,
		lookPath: lookPathOrSbin,
	}
}

var nodeCapabilities = []csi.NodeServiceCapability_RPC_Type{
	csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
	csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
	csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH,
}

func (n *nodeService) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: each(nodeCapabilities, func(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
	})}, nil
}

func (n *nodeService) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             n.a.cfg.NodeID,
		MaxVolumesPerNode:  n.a.cfg.MaxVolumesPerNode,
		AccessibleTopology: n.a.topology(),
	}, nil
}

// errNeedsRoot is why a process that is not root cannot serve the calls that mount.
var errNeedsRoot = errors.New("this appliance's node service needs root (CAP_SYS_ADMIN) to mount; run it as root or route Node calls to a node driver")

// euidCanMount is the default canMount: only root may attach loop devices and mount.
func euidCanMount() error {
	if err := platformCanMount(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errNeedsRoot
	}
	return nil
}

// lookPathOrSbin is exec.LookPath that also tries the sbin folders, which a non-login PATH
// often lacks although mkfs.ext4, losetup and friends live there.
func lookPathOrSbin(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		if p, err2 := exec.LookPath(filepath.Join(dir, name)); err2 == nil {
			return p, nil
		}
	}
	return "", err
}

// nodeVolume is what the node service needs of a volume's record.
type nodeVolume struct {
	id            string
	image         string
	capacityBytes int64
}

// volume reads volume id's record, or fails with NOT_FOUND. It holds the appliance's state
// lock only while it copies the record.
func (n *nodeService) volume(id string) (nodeVolume, error) {
	var out nodeVolume
	err := n.a.view(func(s *state) error {
		v := s.Volumes[id]
		if v == nil {
			return notFound("volume", id)
		}
		out = nodeVolume{id: id, image: n.a.images.volumePath(id), capacityBytes: v.CapacityBytes}
		return nil
	})
	return out, err
}

// lockVolume waits until no other call works on volume id, or until ctx ends.
func (n *nodeService) lockVolume(ctx context.Context, id string) (unlock func(), err error) {
	unlock, err = n.locks.lock(ctx, id)
	if err != nil {
		return nil, status.Errorf(status.FromContextError(err).Code(), "node: another call on volume %s is still running and this one's deadline passed; retry", id)
	}
	return unlock, nil
}

// lockedVolume is lockVolume followed by volume: it waits for volume id's lock and reads its
// record (NOT_FOUND when the appliance has no such volume). On success the caller must call
// unlock; on failure the lock is already released.
func (n *nodeService) lockedVolume(ctx context.Context, id string) (vol nodeVolume, unlock func(), err error) {
	unlock, err = n.lockVolume(ctx, id)
	if err != nil {
		return nodeVolume{}, nil, err
	}
	if vol, err = n.volume(id); err != nil {
		unlock()
		return nodeVolume{}, nil, err
	}
	return vol, unlock, nil
}

// undo runs NodeUnstageVolume or NodeUnpublishVolume of volume id at path, the request's
// field: it checks both (INVALID_ARGUMENT), waits for the volume's lock and fails with
// FAILED_PRECONDITION when this process cannot mount or lacks losetup, in that order; then,
// under the lock, it reads the mount table and undoes the stage or publication with do (its
// error as nodeStatus says) and forgets it with drop, both given path resolved
// (resolvePath). It does not read the volume's record: undoing a volume that no longer
// exists is OK.
func (n *nodeService) undo(ctx context.Context, id, field, path string, do func(ctx context.Context, tab mountTable, id, resolved string) error, drop func(id, resolved string)) error {
	if err := checkVolumeAt(id, field, path); err != nil {
		return err
	}
	unlock, err := n.lockVolume(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	if err := n.mayMount("losetup"); err != nil {
		return err
	}
	resolved := resolvePath(path)
	tab, err := readMountTable()
	if err == nil {
		err = do(ctx, tab, id, resolved)
	}
	if err != nil {
		return nodeStatus(err)
	}
	drop(id, resolved)
	return nil
}

// mountCall is a NodeStageVolume or NodePublishVolume under way: the volume's record, read
// under its lock, and what the request asks of the mount beyond its capability.
type mountCall struct {
	vol     nodeVolume
	opts    mountOptions
	askedRO bool // publish_context "readonly", or "ro" among the mount flags
	unlock  func()
}

// beginMount starts NodeStageVolume or NodePublishVolume of volume id with capability c: the
// check of the path the call mounts at, c's (checkNodeCapability), then the call's further
// checks (INVALID_ARGUMENT or FAILED_PRECONDITION, the first that failed), its mount request
// (mountRequest), the volume's lock and record (NOT_FOUND) and FAILED_PRECONDITION when this
// process cannot mount or lacks one of tools, in that order. The caller must call the
// result's unlock; on failure the lock is already released.
func (n *nodeService) beginMount(ctx context.Context, id string, c *csi.VolumeCapability, publishContext map[string]string, tools []string, pathCheck error, checks ...error) (mountCall, error) {
	if err := firstError(append([]error{pathCheck, checkNodeCapability("volume_capability", c)}, checks...)...); err != nil {
		return mountCall{}, err
	}
	opts, askedRO, err := mountRequest(c, publishContext)
	if err != nil {
		return mountCall{}, err
	}
	vol, unlock, err := n.lockedVolume(ctx, id)
	if err != nil {
		return mountCall{}, err
	}
	if err := n.mayMount(tools...); err != nil {
		unlock()
		return mountCall{}, err
	}
	return mountCall{vol: vol, opts: opts, askedRO: askedRO, unlock: unlock}, nil
}

// mayMount fails with FAILED_PRECONDITION when this process cannot mount or lacks a tool the
// call will run, before the call changes anything.
func (n *nodeService) mayMount(tools ...string) error {
	if err := n.canMount(); err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	for _, t := range tools {
		if _, err := n.tool(t); err != nil {
			return nodeStatus(err)
		}
	}
	return nil
}

// nodeStatus turns an error of the node's machinery into the status an RPC returns: a status
// keeps its code; a missing tool, or a mount or tool the kernel refused (EPERM, "permission
// denied"), is FAILED_PRECONDITION, since retrying cannot help until the host changes;
// anything else is INTERNAL.
func nodeStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var missing *missingToolError
	var tool *toolError
	switch {
	case errors.As(err, &missing):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.As(err, &tool) && tool.denied():
		return status.Errorf(codes.FailedPrecondition, "node: %v: %v", err, errNeedsRoot)
	case errors.Is(err, errNeedsRoot):
		return status.Errorf(codes.FailedPrecondition, "node: %v", err)
	case errors.Is(err, os.ErrPermission):
		return status.Errorf(codes.FailedPrecondition, "node: %v: %v", err, errNeedsRoot)
	}
	return status.Errorf(codes.Internal, "node: %v", err)
}
