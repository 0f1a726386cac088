//go:build linux

package embedded

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// platformCanMount says why this platform cannot mount: Linux can.
func platformCanMount() error { return nil }

// mountOptions are parsed mount_flags: flags for mount(2) and the file system's own options.
type mountOptions struct {
	flags uintptr
	data  string
}

func (o mountOptions) readonly() bool { return o.flags&unix.MS_RDONLY != 0 }

// withReadonly returns o with MS_RDONLY set when ro is true.
func (o mountOptions) withReadonly(ro bool) mountOptions {
	if ro {
		o.flags |= unix.MS_RDONLY
	}
	return o
}

// perMountFlags are the flags that belong to a mount point rather than to a file system, so
// a bind mount can carry its own.
const perMountFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
	unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME | unix.MS_STRICTATIME

// mountFlagTable maps the generic options of mount(8) to the flag they set or clear.
var mountFlagTable = map[string]struct {
	flag  uintptr
	clear bool
}{
	"defaults":    {0, false},
	"ro":          {unix.MS_RDONLY, false},
	"rw":          {unix.MS_RDONLY, true},
	"nosuid":      {unix.MS_NOSUID, false},
	"suid":        {unix.MS_NOSUID, true},
	"nodev":       {unix.MS_NODEV, false},
	"dev":         {unix.MS_NODEV, true},
	"noexec":      {unix.MS_NOEXEC, false},
	"exec":        {unix.MS_NOEXEC, true},
	"sync":        {unix.MS_SYNCHRONOUS, false},
	"async":       {unix.MS_SYNCHRONOUS, true},
	"dirsync":     {unix.MS_DIRSYNC, false},
	"noatime":     {unix.MS_NOATIME, false},
	"atime":       {unix.MS_NOATIME, true},
	"nodiratime":  {unix.MS_NODIRATIME, false},
	"diratime":    {unix.MS_NODIRATIME, true},
	"relatime":    {unix.MS_RELATIME, false},
	"norelatime":  {unix.MS_RELATIME, true},
	"strictatime": {unix.MS_STRICTATIME, false},
	"lazytime":    {unix.MS_LAZYTIME, false},
	"nolazytime":  {unix.MS_LAZYTIME, true},
	"mand":        {unix.MS_MANDLOCK, false},
	"nomand":      {unix.MS_MANDLOCK, true},
	"silent":      {unix.MS_SILENT, false},
	"loud":        {unix.MS_SILENT, true},
}

// refusedMountFlags change what a mount is rather than how it behaves; the node service
// decides those itself.
var refusedMountFlags = []string{"bind", "rbind", "remount", "move", "loop",
	"shared", "rshared", "private", "rprivate", "slave", "rslave", "unbindable", "runbindable"}

// parseMountFlags turns a capability's mount_flags, as mount(8) would read them after -o,
// into mount(2) arguments. Each entry may itself hold several comma-separated options.
// Options that are not generic go to the file system as data; the kernel judges those when
// the volume is mounted.
func parseMountFlags(list []string) (mountOptions, error) {
	var o mountOptions
	var data []string
	for _, entry := range list {
		for opt := range strings.SplitSeq(entry, ",") {
			opt = strings.TrimSpace(opt)
			switch {
			case opt == "":
				continue
			case strings.IndexByte(opt, 0) >= 0:
				return mountOptions{}, fmt.Errorf("mount flag %q contains a NUL byte", opt)
			case slices.Contains(refusedMountFlags, opt):
				return mountOptions{}, fmt.Errorf("mount flag %q is not allowed: the node service decides how volumes are mounted", opt)
			}
			if f, ok := mountFlagTable[opt]; ok {
				if f.clear {
					o.flags &^= f.flag
				} else {
					o.flags |= f.flag
				}
				continue
			}
			data = append(data, opt)
		}
	}
	o.data = strings.Join(data, ",")
	return o, nil
}

// mountFS mounts the file system of type fstype on dev at target.
func mountFS(dev, target, fstype string, o mountOptions) error {
	if err := unix.Mount(dev, target, fstype, o.flags, o.data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", dev, target, err)
	}
	return nil
}

// bindMount bind-mounts source (a directory or a device node) onto target and then gives the
// new mount point the per-mount flags of o, read-only among them. A bind mount ignores those
// flags on creation, so they take a second call (MS_REMOUNT|MS_BIND), which keeps the flags
// the source's mount point already had. When that fails the bind mount is undone.
func bindMount(source, target string, o mountOptions) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s on %s: %w", source, target, err)
	}
	want := o.flags & perMountFlags
	if want == 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		unix.Unmount(target, 0)
		return fmt.Errorf("read the flags of %s: %w", target, err)
	}
	flags := unix.MS_REMOUNT | unix.MS_BIND | inheritedFlags(st.Flags) | want
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		unix.Unmount(target, 0)
		return fmt.Errorf("make the bind mount at %s read-only or apply its mount flags: %w", target, err)
	}
	return nil
}

// inheritedFlags turns statfs flags (ST_*) into the per-mount MS_* flags they stand for.
func inheritedFlags(st int64) uintptr {
	var f uintptr
	for _, p := range []struct {
		st int64
		ms uintptr
	}{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st&p.st != 0 {
			f |= p.ms
		}
	}
	return f
}

// unmount unmounts the mount at the top of target. A target that is no mount point (or does
// not exist) is fine. A busy mount is an error: it is never detached lazily, since that
// would hide a volume that is still in use.
func unmount(target string) error {
	err := unix.Unmount(target, 0)
	switch {
	case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("unmount %s: %w; a process still uses it: stop it and retry", target, err)
	}
	return fmt.Errorf("unmount %s: %w", target, err)
}

// fsUsageAt reads the usage of the file system mounted at path.
func fsUsageAt(path string) (fsUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsUsage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := st.Bsize
	return fsUsage{
		totalBytes:  int64(st.Blocks) * bs,
		availBytes:  int64(st.Bavail) * bs,
		usedBytes:   int64(st.Blocks-st.Bfree) * bs,
		totalInodes: int64(st.Files),
		freeInodes:  int64(st.Ffree),
		usedInodes:  int64(st.Files - st.Ffree),
		readonly:    st.Flags&unix.ST_RDONLY != 0,
	}, nil
}

// blockDeviceNumber returns the device numbers of the block device node at path; ok is false
// when path is not one.
func blockDeviceNumber(path string) (major, minor int, ok bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, 0, false
	}
	return int(unix.Major(st.Rdev)), int(unix.Minor(st.Rdev)), true
}

// isInvalidArgument reports whether the kernel refused a mount as invalid (EINVAL), which for
// a fresh mount with file-system options means it did not accept those options.
func isInvalidArgument(err error) bool {
	return errors.Is(err, unix.EINVAL)
}
