package embedded

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxPathBytes bounds the path fields of Node calls. CSI lifts its 128-byte limit for them
// and asks plugins to accept what the OS accepts; Linux's PATH_MAX is 4096.
const maxPathBytes = 4096

// checkNodePath checks a REQUIRED path field: present, absolute, at most maxPathBytes and
// free of NUL bytes (INVALID_ARGUMENT otherwise).
func checkNodePath(field, p string) error {
	switch {
	case p == "":
		return invalid("%s is required", field)
	case len(p) > maxPathBytes:
		return invalid("%s is %d bytes long; this node accepts paths of at most %d bytes", field, len(p), maxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return invalid("%s contains a NUL byte", field)
	case !filepath.IsAbs(p):
		return invalid("%s %q is not an absolute path; CSI requires one", field, p)
	}
	return nil
}

// checkVolumeAt checks the volume_id and the REQUIRED path field of a Node call, in that
// order (INVALID_ARGUMENT; see checkRequired and checkNodePath).
func checkVolumeAt(id, field, path string) error {
	if err := checkRequired("volume_id", id); err != nil {
		return err
	}
	return checkNodePath(field, path)
}

// checkVolumeAndPath checks the volume_id and volume_path of NodeExpandVolume and
// NodeGetVolumeStats: both required. A path where the volume is not is NOT_FOUND, found
// later, not INVALID_ARGUMENT.
func checkVolumeAndPath(id, path string) error {
	if err := checkRequired("volume_id", id); err != nil {
		return err
	}
	if path == "" {
		return invalid("volume_path is required")
	}
	return nil
}

// checkNodeCapability checks the volume_capability of NodeStageVolume and NodePublishVolume.
// A missing or malformed capability is INVALID_ARGUMENT; one that is well formed but that the
// volume cannot serve (an access mode or fs_type the appliance does not offer) is
// FAILED_PRECONDITION, the "exceeds capabilities" row of both calls' error tables.
func checkNodeCapability(field string, c *csi.VolumeCapability) error {
	if c == nil {
		return invalid("%s is required", field)
	}
	if c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN {
		return invalid("%s.access_mode.mode is required", field)
	}
	switch t := c.GetAccessType().(type) {
	case *csi.VolumeCapability_Block:
	case *csi.VolumeCapability_Mount:
		if t.Mount.GetVolumeMountGroup() != "" {
			return invalid("%s.mount.volume_mount_group is not supported: this node service does not offer VOLUME_MOUNT_GROUP", field)
		}
		n := 0
		for _, f := range t.Mount.GetMountFlags() {
			n += len(f)
		}
		if n > maxMapBytes {
			return invalid("%s.mount.mount_flags hold %d bytes; CSI allows at most %d", field, n, maxMapBytes)
		}
	default:
		return invalid("%s.access_type is required: set block or mount", field)
	}
	if err := capabilityProblem(c); err != nil {
		return status.Errorf(codes.FailedPrecondition, "%s: %v", field, err)
	}
	return nil
}

// readonlyFromContext reads the "readonly" entry ControllerPublishVolume put in the
// publish_context; a missing entry (or context) means read-write.
func readonlyFromContext(pc map[string]string) (bool, error) {
	v, ok := pc[publishContextReadonly]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid("publish_context[%q] is %q; pass it on as ControllerPublishVolume returned it (\"true\" or \"false\")", publishContextReadonly, v)
	}
	return b, nil
}

// mountRequest reads what NodeStageVolume and NodePublishVolume take from their publish_context
// and volume_capability beyond the capability itself: the parsed mount flags, and whether
// either asks for read-only (publish_context "readonly", or "ro" among the flags). A bad
// entry in either is INVALID_ARGUMENT, the publish_context checked first.
func mountRequest(c *csi.VolumeCapability, publishContext map[string]string) (opts mountOptions, readonly bool, err error) {
	ctxRO, err := readonlyFromContext(publishContext)
	if err != nil {
		return mountOptions{}, false, err
	}
	opts, err = parseMountFlags(c.GetMount().GetMountFlags())
	if err != nil {
		return mountOptions{}, false, invalid("volume_capability.mount.mount_flags: %v", err)
	}
	return opts, ctxRO || opts.readonly(), nil
}

// isBlock reports whether c asks for a raw block device rather than a file system.
func isBlock(c *csi.VolumeCapability) bool {
	return c.GetBlock() != nil
}

// allowsManyTargets reports whether a volume with access mode m may be published at more
// than one target path of the node (the second table of the NodePublishVolume section).
func allowsManyTargets(m csi.VolumeCapability_AccessMode_Mode) bool {
	switch m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
		return true
	}
	return false
}

// blockFileName is the name of the file in a staging directory onto which a block volume's
// device is bind-mounted, or "" when id cannot be one path element (it then names no volume
// of this appliance, whose IDs are "vol-" and hex digits).
func blockFileName(id string) string {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") {
		return ""
	}
	return id
}
