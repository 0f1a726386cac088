package embedded

import (
	"context"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fsUsage is what statfs says of a mounted file system.
type fsUsage struct {
	totalBytes, availBytes, usedBytes   int64
	totalInodes, freeInodes, usedInodes int64
	readonly                            bool // mounted read-only (ST_RDONLY)
}

// NodeGetVolumeStats reports the usage of a volume where it is staged or published: bytes and
// inodes of its file system, or the size of its block device (used and available are left
// out for a device, as the spec allows). volume_path may be the staging path or a target
// path. A volume_path where the volume is not mounted (not absolute, missing, or another
// volume's) is NOT_FOUND, the spec's "does not exist on specified volume_path".
func (n *nodeService) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if err := checkVolumeAndPath(id, path); err != nil {
		return nil, err
	}
	vol, err := n.volume(id)
	if err != nil {
		return nil, err
	}
	if _, err := n.tool("losetup"); err != nil {
		return nil, nodeStatus(err)
	}
	found, err := n.find(ctx, vol, path)
	if err != nil {
		return nil, nodeStatus(err)
	}
	if found.block {
		size, err := loopSize(found.dev)
		if err != nil {
			return nil, nodeStatus(err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: size},
		}}, nil
	}
	u, err := fsUsageAt(found.path)
	if err != nil {
		return nil, nodeStatus(err)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: u.totalBytes, Available: u.availBytes, Used: u.usedBytes},
		{Unit: csi.VolumeUsage_INODES, Total: u.totalInodes, Available: u.freeInodes, Used: u.usedInodes},
	}}, nil
}

// foundVolume is where find found a volume mounted.
type foundVolume struct {
	path     string     // the mount point
	dev      loopDevice // the loop device behind it
	block    bool       // a bind of the device node rather than its file system
	readonly bool       // the file system or the device cannot be written
}

// find locates vol at path: its file system mounted there, its device bound there (a block
// target), or its device bound in the directory path (a block staging path). Anything else
// is NOT_FOUND.
func (n *nodeService) find(ctx context.Context, vol nodeVolume, path string) (foundVolume, error) {
	if filepath.IsAbs(path) {
		tab, devs, err := n.snapshot(ctx, vol)
		if err != nil {
			return foundVolume{}, err
		}
		path = resolvePath(path)
		if d, m, ok := tab.fileSystemAt(path, devs); ok {
			return foundVolume{path: path, dev: d, readonly: readOnlyFileSystem(m)}, nil
		}
		for _, p := range []string{path, filepath.Join(path, blockFileName(vol.id))} {
			if d, _, ok := tab.deviceAt(p, devs); ok {
				return foundVolume{path: p, dev: d, block: true, readonly: d.readonly}, nil
			}
		}
	}
	return foundVolume{}, status.Errorf(codes.NotFound, "volume %s is not staged or published at %q on this node", vol.id, path)
}
