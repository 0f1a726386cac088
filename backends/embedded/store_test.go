package embedded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestStateSurvivesReopen proves every kind of record is written to disk: a second Open of
// the same directory sees the same volumes, snapshots and publications.
func TestStateSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, Config{DataDir: dir})
	c := &controllerServer{a: a}
	ctx := context.Background()
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "keep", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	if _, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-1", VolumeCapability: rwo}); err != nil {
		t.Fatal(err)
	}
	snap, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "keep-snap", SourceVolumeId: id})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()

	b := openTest(t, Config{DataDir: dir})
	c = &controllerServer{a: b}
	got, err := c.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
	if err != nil || got.GetVolume().GetCapacityBytes() != 4<<20 || len(got.GetStatus().GetPublishedNodeIds()) != 1 {
		t.Fatalf("after reopen: %v %v", err, got)
	}
	if _, err := c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()}); err != nil {
		t.Fatalf("snapshot after reopen: %v", err)
	}
	again, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "keep", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}})
	if err != nil || again.GetVolume().GetVolumeId() != id {
		t.Fatalf("create of the same name after reopen: %v, id %s want %s", err, again.GetVolume().GetVolumeId(), id)
	}
}

// TestOpenRemovesLeftovers plays the files a crash leaves behind — a half-written temporary
// image and an image whose create never reached the state — and checks Open removes them
// and nothing else.
func TestOpenRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, Config{DataDir: dir})
	vol, err := (&controllerServer{a: a}).CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "live", VolumeCapabilities: []*csi.VolumeCapability{rwo}})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	for _, f := range []string{"volumes/vol-orphan.img", "volumes/vol-half.img.tmp", "snapshots/snap-orphan.img"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	openTest(t, Config{DataDir: dir})
	var left []string
	for _, sub := range []string{"volumes", "snapshots"} {
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range entries {
			left = append(left, sub+"/"+e.Name())
		}
	}
	if want := "volumes/" + vol.GetVolume().GetVolumeId() + ".img"; strings.Join(left, ",") != want {
		t.Errorf("files after Open: %v, want only %s", left, want)
	}
}

func TestOneAppliancePerDirectory(t *testing.T) {
	dir := t.TempDir()
	openTest(t, Config{DataDir: dir})
	if _, err := Open(Config{DataDir: dir}, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open of the same directory: %v, want an 'in use' error", err)
	}
}

func TestCorruptStateIsReported(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{DataDir: dir}, nil); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("Open with a corrupt state: %v, want a 'corrupt' error", err)
	}
}

func TestSnapshotCopyKeepsHoles(t *testing.T) {
	a := openTest(t, Config{})
	c := &controllerServer{a: a}
	ctx := context.Background()
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "big", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	f, err := os.OpenFile(a.images.volumePath(id), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("hello"), 512<<20)
	f.Close()
	snap, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: id})
	if err != nil {
		t.Fatal(err)
	}
	clone, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "clone", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}}})
	if err != nil {
		t.Fatal(err)
	}
	path := a.images.volumePath(clone.GetVolume().GetVolumeId())
	b := make([]byte, 5)
	g, _ := os.Open(path)
	g.ReadAt(b, 512<<20)
	g.Close()
	if string(b) != "hello" {
		t.Errorf("clone from snapshot reads %q at the written offset, want hello", b)
	}
	fi, _ := os.Stat(path)
	if fi.Size() != 2<<30 {
		t.Errorf("clone size %d, want %d", fi.Size(), 2<<30)
	}
	if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; used > 16<<20 {
		t.Errorf("a 2 GiB clone of 5 written bytes allocates %d bytes: holes were not kept", used)
	}
	_, err = c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "small", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}})
	wantCode(t, err, codes.OutOfRange, "less than its source")
}
