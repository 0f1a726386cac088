package embedded

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// mountTable is a snapshot of this process's mount table, read from /proc/self/mountinfo,
// in mount order (a mount stacked on another comes after it).
type mountTable []*mountinfo.Info

func readMountTable() (mountTable, error) {
	return mountinfo.GetMounts(nil)
}

// at returns the mounts at exactly path, bottom first.
func (t mountTable) at(path string) []*mountinfo.Info {
	var out []*mountinfo.Info
	for _, m := range t {
		if m.Mountpoint == path {
			out = append(out, m)
		}
	}
	return out
}

// top returns the mount that is visible at path, or nil when path is not a mount point.
func (t mountTable) top(path string) *mountinfo.Info {
	ms := t.at(path)
	if len(ms) == 0 {
		return nil
	}
	return ms[len(ms)-1]
}

// fileSystemOf reports whether m mounts a file system that lives on d (a staged volume or a
// bind mount of one).
func fileSystemOf(m *mountinfo.Info, d loopDevice) bool {
	return m.Major == d.major && m.Minor == d.minor
}

// deviceBind reports whether m bind-mounts the device node of d (a staged or published block
// volume). The mount's root names the node; its device numbers, read through the mount
// point, prove it.
func deviceBind(m *mountinfo.Info, d loopDevice) bool {
	if filepath.Base(m.Root) != d.name() {
		return false
	}
	major, minor, ok := blockDeviceNumber(m.Mountpoint)
	return ok && major == d.major && minor == d.minor
}

// uses reports whether any mount needs d: a file system on it or a bind of its node.
func (t mountTable) uses(d loopDevice) bool {
	return slices.ContainsFunc(t, func(m *mountinfo.Info) bool { return fileSystemOf(m, d) || deviceBind(m, d) })
}

// fileSystemAt returns the device of devs whose file system is visible at path.
func (t mountTable) fileSystemAt(path string, devs []loopDevice) (loopDevice, *mountinfo.Info, bool) {
	m := t.top(path)
	if m == nil {
		return loopDevice{}, nil, false
	}
	d, ok := loopWithNumber(devs, m.Major, m.Minor)
	return d, m, ok
}

// deviceAt returns the device of devs whose node is bind-mounted at path.
func (t mountTable) deviceAt(path string, devs []loopDevice) (loopDevice, *mountinfo.Info, bool) {
	m := t.top(path)
	if m == nil {
		return loopDevice{}, nil, false
	}
	for _, d := range devs {
		if deviceBind(m, d) {
			return d, m, true
		}
	}
	return loopDevice{}, nil, false
}

// mountPointsOf lists the mount points where the file system or the node of one of devs is
// mounted, except those in skip.
func (t mountTable) mountPointsOf(devs []loopDevice, skip ...string) []string {
	var out []string
	for _, m := range t {
		if slices.Contains(skip, m.Mountpoint) || slices.Contains(out, m.Mountpoint) {
			continue
		}
		for _, d := range devs {
			if fileSystemOf(m, d) || deviceBind(m, d) {
				out = append(out, m.Mountpoint)
				break
			}
		}
	}
	return out
}

// loopsAt returns the loop devices of this appliance's images that the mounts at path use.
// It is read before those mounts go, so their devices can be released after.
func (n *nodeService) loopsAt(t mountTable, path string) []loopDevice {
	var out []loopDevice
	for _, m := range t.at(path) {
		if d, ok := n.loopByNumber(m.Major, m.Minor); ok {
			out = append(out, d)
		}
	}
	if major, minor, ok := blockDeviceNumber(path); ok && t.top(path) != nil {
		if d, ok := n.loopByNumber(major, minor); ok {
			out = append(out, d)
		}
	}
	return out
}

// readOnlyMount reports whether m is read-only, per mount point or for its whole file system.
func readOnlyMount(m *mountinfo.Info) bool {
	return slices.Contains(strings.Split(m.Options, ","), "ro") || slices.Contains(strings.Split(m.VFSOptions, ","), "ro")
}

// readOnlyFileSystem reports whether the file system m mounts is read-only as a whole, not
// just at this mount point.
func readOnlyFileSystem(m *mountinfo.Info) bool {
	return slices.Contains(strings.Split(m.VFSOptions, ","), "ro")
}

// resolvePath cleans p and resolves the symbolic links in the part of it that exists, so it
// compares with the mount points of the mount table, which are always resolved.
func resolvePath(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Split(p)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(r, base)
	}
	return p
}

// existsAs reports what is at path: not there (""), a "dir", a "file" (regular), or "other".
func existsAs(path string) (string, error) {
	fi, err := os.Lstat(path)
	switch {
	case os.IsNotExist(err):
		return "", nil
	case err != nil:
		return "", err
	case fi.IsDir():
		return "dir", nil
	case fi.Mode().IsRegular():
		return "file", nil
	}
	return "other", nil
}

// unmountWhile unmounts the mount at the top of path for as long as there is one and mine
// accepts it, so stacked mounts go too. mine == nil accepts every mount.
func unmountWhile(path string, mine func(*mountinfo.Info) bool) error {
	for range 64 {
		tab, err := readMountTable()
		if err != nil {
			return err
		}
		m := tab.top(path)
		if m == nil || (mine != nil && !mine(m)) {
			return nil
		}
		if err := unmount(path); err != nil {
			return err
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 64 unmounts", path)
}
