package embedded

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// needsRoot skips a test that attaches loop devices and mounts when it cannot.
func needsRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount: run go test as root (the node service attaches loop devices and mounts)")
	}
}

// nodeHarness drives the node service of an appliance whose data directory, staging and
// target paths all live in one temporary directory. Whatever a test leaves mounted or
// attached there is unmounted and detached when it ends, passed or failed.
type nodeHarness struct {
	t    *testing.T
	dir  string
	a    *Appliance
	n    *nodeService
	ctrl *controllerServer
}

func newNodeHarness(t *testing.T) *nodeHarness {
	t.Helper()
	dir := resolvePath(t.TempDir())
	// Registered after TempDir's own cleanup, so it runs before the directory is removed.
	t.Cleanup(func() { releaseUnder(t, dir) })
	a := openTest(t, Config{DataDir: filepath.Join(dir, "data")})
	return &nodeHarness{t: t, dir: dir, a: a, n: a.node, ctrl: &controllerServer{a: a}}
}

// releaseUnder unmounts everything mounted under dir and detaches every loop device whose
// image is under dir.
func releaseUnder(t *testing.T, dir string) {
	for range 16 {
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil || len(ms) == 0 {
			break
		}
		for i := len(ms) - 1; i >= 0; i-- {
			unix.Unmount(ms[i].Mountpoint, unix.MNT_DETACH)
		}
	}
	for _, dev := range loopsUnder(dir) {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Logf("cleanup: losetup --detach %s: %v: %s", dev, err, out)
		}
	}
}

// loopsUnder lists the loop devices whose backing file is under dir.
func loopsUnder(dir string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(string(b), dir+"/") {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return out
}

// assertReleased fails the test when anything is still mounted or attached under its
// directory: what the node service must have undone by itself.
func (h *nodeHarness) assertReleased() {
	h.t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(h.dir))
	if err != nil {
		h.t.Fatal(err)
	}
	for _, m := range ms {
		h.t.Errorf("still mounted: %s (%s %s)", m.Mountpoint, m.FSType, m.Source)
	}
	for _, d := range loopsUnder(h.dir) {
		h.t.Errorf("still attached: %s", d)
	}
}

// createVolume creates a volume of size bytes and returns its ID.
func (h *nodeHarness) createVolume(name string, c *csi.VolumeCapability, size int64) string {
	h.t.Helper()
	return h.createVolumeFrom(name, c, size, nil)
}

func (h *nodeHarness) createVolumeFrom(name string, c *csi.VolumeCapability, size int64, src *csi.VolumeContentSource) string {
	h.t.Helper()
	resp, err := h.ctrl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name:                name,
		VolumeCapabilities:  []*csi.VolumeCapability{c},
		CapacityRange:       &csi.CapacityRange{RequiredBytes: size},
		VolumeContentSource: src,
	})
	if err != nil {
		h.t.Fatalf("create volume %s: %v", name, err)
	}
	return resp.GetVolume().GetVolumeId()
}

// mkdir makes a directory under the harness's directory and returns its path.
func (h *nodeHarness) mkdir(elem ...string) string {
	h.t.Helper()
	p := filepath.Join(append([]string{h.dir}, elem...)...)
	if err := os.MkdirAll(p, 0o750); err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *nodeHarness) stage(id, staging string, c *csi.VolumeCapability, pc map[string]string) error {
	_, err := h.n.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: id, StagingTargetPath: staging, VolumeCapability: c, PublishContext: pc,
	})
	return err
}

func (h *nodeHarness) unstage(id, staging string) error {
	_, err := h.n.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	return err
}

func (h *nodeHarness) publish(id, staging, target string, c *csi.VolumeCapability, readonly bool) error {
	_, err := h.n.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: c, Readonly: readonly,
	})
	return err
}

func (h *nodeHarness) unpublish(id, target string) error {
	_, err := h.n.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	return err
}

// must fails the test on err.
func (h *nodeHarness) must(err error, what string) {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
}

// stageAndPublish stages id in a staging directory of its own and publishes it at target.
func (h *nodeHarness) stageAndPublish(id string, c *csi.VolumeCapability, target string, readonly bool) (staging string) {
	h.t.Helper()
	staging = h.mkdir("staging", id)
	h.must(h.stage(id, staging, c, nil), "stage")
	h.must(h.publish(id, staging, target, c, readonly), "publish")
	return staging
}

// readAt reads len(want) bytes at off from the file or device at path and compares.
func readAt(t *testing.T, path string, off int64, want []byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, off); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s at %d holds %q, want %q", path, off, got, want)
	}
}

func bytesOf(t *testing.T, resp *csi.NodeGetVolumeStatsResponse, unit csi.VolumeUsage_Unit) *csi.VolumeUsage {
	t.Helper()
	for _, u := range resp.GetUsage() {
		if u.GetUnit() == unit {
			return u
		}
	}
	t.Fatalf("no %s usage in %v", unit, resp)
	return nil
}

const testVolumeBytes = 64 << 20

var (
	snw   = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	snsw  = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	snmw  = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
	snro  = csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
	mnro  = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	mnmw  = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	bgCtx = context.Background()
)

// mountsAt lists the mounts at path, for assertions.
func mountsAt(t *testing.T, path string) []*mountinfo.Info {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}
