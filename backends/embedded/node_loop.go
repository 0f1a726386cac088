package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// loopMajor is the block major number of every loop device (LOOP_MAJOR).
const loopMajor = 7

// loopDevice is a loop device with an image attached.
type loopDevice struct {
	path         string // /dev/loopN
	major, minor int
	readonly     bool
}

func (d loopDevice) name() string { return filepath.Base(d.path) }

// loopsOf lists the loop devices image is attached to (losetup --associated).
func (n *nodeService) loopsOf(ctx context.Context, image string) ([]loopDevice, error) {
	out, err := n.run(ctx, "losetup", "--list", "--noheadings", "--output", "NAME,MAJ:MIN,RO", "--associated", image)
	if err != nil {
		return nil, err
	}
	return parseLoopList(out)
}

// parseLoopList parses the output of losetup --list --output NAME,MAJ:MIN,RO.
func parseLoopList(out string) ([]loopDevice, error) {
	var devs []loopDevice
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("losetup printed %q; expected NAME MAJ:MIN RO", strings.TrimSpace(line))
		}
		maj, min, ok := strings.Cut(f[1], ":")
		ma, err1 := strconv.Atoi(maj)
		mi, err2 := strconv.Atoi(min)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("losetup printed the device number %q; expected MAJOR:MINOR", f[1])
		}
		devs = append(devs, loopDevice{path: f[0], major: ma, minor: mi, readonly: f[2] == "1"})
	}
	return devs, nil
}

// loopFor returns a loop device of image with the given read-only-ness: an attached one,
// its size refreshed so that an image grown by ControllerExpandVolume shows in full, or a
// newly attached one.
func (n *nodeService) loopFor(ctx context.Context, image string, readonly bool) (loopDevice, error) {
	devs, err := n.loopsOf(ctx, image)
	if err != nil {
		return loopDevice{}, err
	}
	for _, d := range devs {
		if d.readonly == readonly {
			return d, n.refreshLoop(ctx, d)
		}
	}
	args := []string{"--find", "--show"}
	if readonly {
		args = append(args, "--read-only")
	}
	out, err := n.run(ctx, "losetup", append(args, image)...)
	if err != nil {
		return loopDevice{}, fmt.Errorf("attach %s to a loop device: %w", filepath.Base(image), err)
	}
	path := strings.TrimSpace(out)
	if devs, err = n.loopsOf(ctx, image); err != nil {
		return loopDevice{}, err
	}
	for _, d := range devs {
		if d.path == path {
			return d, nil
		}
	}
	return loopDevice{}, fmt.Errorf("losetup attached %s to %s, which then did not list it", filepath.Base(image), path)
}

// refreshLoop makes d see the current size of its image (losetup --set-capacity).
func (n *nodeService) refreshLoop(ctx context.Context, d loopDevice) error {
	_, err := n.run(ctx, "losetup", "--set-capacity", d.path)
	return err
}

// loopSize is the size of d in bytes, as the kernel sees it.
func loopSize(d loopDevice) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/size", d.major, d.minor))
	if err != nil {
		return 0, err
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", d.path, err)
	}
	return sectors * 512, nil
}

// loopByNumber returns the loop device with the given numbers if it is attached to an image
// of this appliance; it lets NodeUnstage and NodeUnpublish release the devices of a volume
// whose image is already gone.
func (n *nodeService) loopByNumber(major, minor int) (loopDevice, bool) {
	if major != loopMajor {
		return loopDevice{}, false
	}
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	back, err := os.ReadFile(filepath.Join(sys, "loop", "backing_file"))
	if err != nil || !strings.HasPrefix(string(back), n.a.images.volumesDir+string(filepath.Separator)) {
		return loopDevice{}, false
	}
	link, err := filepath.EvalSymlinks(sys)
	if err != nil {
		return loopDevice{}, false
	}
	ro, _ := os.ReadFile(filepath.Join(sys, "ro"))
	return loopDevice{
		path: "/dev/" + filepath.Base(link), major: major, minor: minor,
		readonly: strings.TrimSpace(string(ro)) == "1",
	}, true
}

// releaseLoops detaches every loop device of image (none when image is ""), and every device
// in extra, that no mount uses any more. A device some process still holds open is detached
// by the kernel when it is closed (losetup --detach sets autoclear).
func (n *nodeService) releaseLoops(ctx context.Context, image string, extra ...loopDevice) error {
	var devs []loopDevice
	if image != "" {
		var err error
		if devs, err = n.loopsOf(ctx, image); err != nil {
			return err
		}
	}
	for _, e := range extra {
		if !containsLoop(devs, e) {
			devs = append(devs, e)
		}
	}
	if len(devs) == 0 {
		return nil
	}
	tab, err := readMountTable()
	if err != nil {
		return err
	}
	for _, d := range devs {
		if tab.uses(d) {
			continue
		}
		if _, err := n.run(ctx, "losetup", "--detach", d.path); err != nil {
			return fmt.Errorf("detach %s: %w", d.path, err)
		}
	}
	return nil
}

func containsLoop(devs []loopDevice, d loopDevice) bool {
	for _, x := range devs {
		if x.major == d.major && x.minor == d.minor {
			return true
		}
	}
	return false
}

// loopWithNumber finds the device of devs with the given numbers.
func loopWithNumber(devs []loopDevice, major, minor int) (loopDevice, bool) {
	for _, d := range devs {
		if d.major == major && d.minor == minor {
			return d, true
		}
	}
	return loopDevice{}, false
}
