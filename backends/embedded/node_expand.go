package embedded

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeExpandVolume makes the node see a volume that ControllerExpandVolume grew: it refreshes
// the size of the volume's loop devices and, for a file system smaller than its device, grows
// it online (resize2fs; the kernel wants CAP_SYS_RESOURCE for that).
// volume_path must be where the volume is staged or published (NOT_FOUND otherwise: the spec
// gives FAILED_PRECONDITION only to a volume that cannot grow while in use, and that code
// tells the CO never to retry). capacity_range, if given, must fit the size the controller
// gave the volume (OUT_OF_RANGE otherwise). It returns the size of the device.
//
// A volume already as large as asked is OK. A file system mounted read-only cannot grow
// online: FAILED_PRECONDITION; it grows when next staged read-write.
func (n *nodeService) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if err := checkVolumeAndPath(id, path); err != nil {
		return nil, err
	}
	if c := req.GetVolumeCapability(); c != nil {
		if err := capabilityProblem(c); err != nil {
			return nil, invalid("volume_capability: %v", err)
		}
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	switch {
	case required < 0 || limit < 0:
		return nil, invalid("capacity_range: required_bytes (%d) and limit_bytes (%d) must not be negative", required, limit)
	case limit > 0 && required > limit:
		return nil, invalid("capacity_range: required_bytes (%d) exceeds limit_bytes (%d)", required, limit)
	}
	vol, unlock, err := n.lockedVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	switch {
	case required > vol.capacityBytes:
		return nil, status.Errorf(codes.OutOfRange, "capacity_range.required_bytes is %d but volume %s holds %d bytes; call ControllerExpandVolume first", required, id, vol.capacityBytes)
	case limit > 0 && limit < vol.capacityBytes:
		return nil, status.Errorf(codes.OutOfRange, "volume %s already holds %d bytes, more than capacity_range.limit_bytes %d; volumes cannot shrink", id, vol.capacityBytes, limit)
	}
	if err := n.mayMount("losetup", "resize2fs"); err != nil {
		return nil, err
	}
	found, err := n.find(ctx, vol, path)
	if err != nil {
		return nil, nodeStatus(err)
	}
	if c := req.GetVolumeCapability(); c != nil && isBlock(c) != found.block {
		return nil, invalid("volume_capability asks for %s but volume %s is %s at %q; pass its capability or none", accessName(isBlock(c)), id, accessName(found.block), path)
	}
	size, err := n.expand(ctx, vol, found)
	if err != nil {
		return nil, nodeStatus(err)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

func (n *nodeService) expand(ctx context.Context, vol nodeVolume, found foundVolume) (int64, error) {
	devs, err := n.loopsOf(ctx, vol.image)
	if err != nil {
		return 0, err
	}
	for _, d := range devs {
		if err := n.refreshLoop(ctx, d); err != nil {
			return 0, err
		}
	}
	size, err := loopSize(found.dev)
	if err != nil || found.block {
		return size, err
	}
	fs, err := fsSize(found.dev.path)
	if err != nil || fs >= size {
		return size, err
	}
	if found.readonly {
		return 0, status.Errorf(codes.FailedPrecondition, "volume %s is mounted read-only at %q and its file system cannot grow online; it grows the next time the volume is staged read-write", vol.id, found.path)
	}
	if err := n.growOnline(ctx, vol.id, found.dev.path); err != nil {
		return 0, err
	}
	return size, nil
}
