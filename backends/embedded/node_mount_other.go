//go:build !linux

package embedded

import "errors"

// The node service mounts with Linux loop devices and bind mounts. Elsewhere the package
// still builds, and every Node call that must mount fails with FAILED_PRECONDITION.

var errNodeNeedsLinux = errors.New("this appliance's node service mounts with Linux loop devices and runs on Linux only; route Node calls to a node driver")

type mountOptions struct {
	flags uintptr
	data  string
}

func (o mountOptions) readonly() bool                      { return false }
func (o mountOptions) withReadonly(ro bool) mountOptions   { return o }
func parseMountFlags([]string) (mountOptions, error)       { return mountOptions{}, nil }
func mountFS(string, string, string, mountOptions) error   { return errNodeNeedsLinux }
func bindMount(string, string, mountOptions) error         { return errNodeNeedsLinux }
func unmount(string) error                                 { return errNodeNeedsLinux }
func fsUsageAt(string) (fsUsage, error)                    { return fsUsage{}, errNodeNeedsLinux }
func blockDeviceNumber(string) (major, minor int, ok bool) { return 0, 0, false }
func isInvalidArgument(error) bool                         { return false }

// platformCanMount says why this platform cannot mount.
func platformCanMount() error { return errNodeNeedsLinux }
