package embedded

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Size limits of the CSI spec ("Size Limits").
const (
	maxStringBytes = 128
	maxMapBytes    = 4 << 10
)

// invalid returns an INVALID_ARGUMENT status.
func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// firstError returns the first error of errs that is not nil: the checks of a request's
// fields, each evaluated (they only read the request), reported in the order given.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkRequired fails when a REQUIRED string field is empty or longer than the spec allows.
func checkRequired(field, value string) error {
	if value == "" {
		return invalid("%s is required", field)
	}
	return checkLength(field, value)
}

func checkLength(field, value string) error {
	if len(value) > maxStringBytes {
		return invalid("%s is %d bytes long; CSI allows at most %d", field, len(value), maxStringBytes)
	}
	return nil
}

// checkName checks a CO-generated name: required, at most 128 bytes, valid UTF-8, and free
// of the control characters the spec bans.
func checkName(field, name string) error {
	if err := checkRequired(field, name); err != nil {
		return err
	}
	if !utf8.ValidString(name) {
		return invalid("%s is not valid UTF-8", field)
	}
	for _, r := range name {
		if r <= 0x08 || r == 0x0B || r == 0x0C || (r >= 0x0E && r <= 0x1F) || (r >= 0x7F && r <= 0x9F) {
			return invalid("%s contains the control character U+%04X, which CSI forbids in names", field, r)
		}
	}
	return nil
}

// checkMap enforces the spec's 4 KiB limit on a map field, counting keys and values.
func checkMap(field string, m map[string]string) error {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	if n > maxMapBytes {
		return invalid("%s holds %d bytes; CSI allows at most %d", field, n, maxMapBytes)
	}
	return nil
}

// checkParameters rejects keys the appliance does not know, naming the ones it does.
func checkParameters(field string, m map[string]string, known []string) error {
	if err := checkMap(field, m); err != nil {
		return err
	}
	for k := range m {
		if !slices.Contains(known, k) {
			return invalid("%s: unknown key %q; this appliance accepts %s", field, k, strings.Join(known, ", "))
		}
	}
	return nil
}

// The access modes the appliance serves. An ext4 image cannot be written from two nodes, so
// the multi-node writer modes are refused.
var supportedAccessModes = []csi.VolumeCapability_AccessMode_Mode{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
	csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
}

// Filesystems NodeStageVolume can make; the empty fs_type means ext4.
var supportedFsTypes = []string{"", "ext4"}

// checkCapabilities checks that caps is present and that every capability in it is one the
// appliance can honour. field names the request field, for the message.
func checkCapabilities(field string, caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return invalid("%s is required", field)
	}
	for i, c := range caps {
		if err := capabilityProblem(c); err != nil {
			return invalid("%s[%d]: %v", field, i, err)
		}
	}
	return nil
}

// capabilityProblem says why c cannot be honoured, or returns nil.
func capabilityProblem(c *csi.VolumeCapability) error {
	if c == nil {
		return fmt.Errorf("capability is empty")
	}
	if c.GetAccessMode() == nil {
		return fmt.Errorf("access_mode is required")
	}
	mode := c.GetAccessMode().GetMode()
	if mode == csi.VolumeCapability_AccessMode_UNKNOWN {
		return fmt.Errorf("access_mode.mode is required")
	}
	if !slices.Contains(supportedAccessModes, mode) {
		return fmt.Errorf("access mode %s is not supported: an image cannot be written from several nodes", mode)
	}
	switch t := c.GetAccessType().(type) {
	case *csi.VolumeCapability_Block:
	case *csi.VolumeCapability_Mount:
		if !slices.Contains(supportedFsTypes, t.Mount.GetFsType()) {
			return fmt.Errorf("fs_type %q is not supported; use ext4", t.Mount.GetFsType())
		}
		n := 0
		for _, f := range t.Mount.GetMountFlags() {
			n += len(f)
		}
		if n > maxMapBytes {
			return fmt.Errorf("mount_flags hold %d bytes; CSI allows at most %d", n, maxMapBytes)
		}
	default:
		return fmt.Errorf("access_type is required: set block or mount")
	}
	return nil
}

func isMultiNode(mode string) bool {
	return strings.HasPrefix(mode, "MULTI_NODE")
}
