package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// The controller's view of a volume's health is the view of its image file, the one thing the
// appliance keeps of a volume besides its record:
//
//   - missing: INACCESSIBLE and DATA_LOSS, reason ImageMissing;
//   - not a regular file, or it cannot be opened or read: INACCESSIBLE, reason ImageUnreadable;
//   - smaller than the capacity recorded: DATA_LOSS, reason ImageTruncated (what lay past its
//     end is gone; images only ever grow).
//
// A volume with none of these reports an empty health_statuses list, as the spec asks of a
// known volume with no adverse condition.
const (
	reasonImageMissing    = "ImageMissing"
	reasonImageUnreadable = "ImageUnreadable"
	reasonImageTruncated  = "ImageTruncated"
)

// ControllerGetVolumeHealth reports the health of one volume's image. An unknown volume is
// NOT_FOUND. The checks (a stat and a one-byte read) run under the state lock, like every
// controller call.
func (c *controllerServer) ControllerGetVolumeHealth(_ context.Context, req *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error) {
	id := req.GetVolumeId()
	if err := checkRequired("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkMap("secrets", req.GetSecrets()); err != nil {
		return nil, err
	}
	h, err := c.a.imageHealth(id)
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeHealthResponse{VolumeHealth: h.proto()}, nil
}

// ControllerListVolumeHealth lists the volumes with an adverse condition, in creation order,
// and leaves the healthy ones out, as the spec advises. Its pages are positions in the
// creation order, like those of ListVolumes: a volume that falls ill behind the position of a
// token shows up in the next listing, not in this one. A token not issued by this listing is
// ABORTED.
func (c *controllerServer) ControllerListVolumeHealth(_ context.Context, req *csi.ControllerListVolumeHealthRequest) (*csi.ControllerListVolumeHealthResponse, error) {
	if err := checkMap("secrets", req.GetSecrets()); err != nil {
		return nil, err
	}
	type ill struct {
		seq    int64
		health *csi.VolumeHealth
	}
	seqOf := func(i ill) int64 { return i.seq }
	var out *csi.ControllerListVolumeHealthResponse
	err := c.a.view(func(s *state) error {
		// The first page call checks the token and keeps only the volumes after it, so a
		// bad token costs no file checks and a later page does not check earlier volumes
		// again; the second cuts the ill ones to max_entries (and refuses a negative one).
		rest, _, err := page(volumeHealthListing, slices.Collect(maps.Values(s.Volumes)), func(v *volume) int64 { return v.Seq }, req.GetStartingToken(), 0)
		if err != nil {
			return err
		}
		var sick []ill
		for _, v := range rest {
			if h := c.a.volumeHealth(v); !h.healthy() {
				sick = append(sick, ill{seq: v.Seq, health: h.proto()})
			}
		}
		entries, next, err := page(volumeHealthListing, sick, seqOf, "", req.GetMaxEntries())
		if err != nil {
			return err
		}
		out = &csi.ControllerListVolumeHealthResponse{NextToken: next}
		for _, e := range entries {
			out.Entries = append(out.Entries, e.health)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// volumeHealthListing ties ControllerListVolumeHealth's tokens to it (see page).
const volumeHealthListing = "volume-health"

// imageHealth checks the image of volume id, or fails with NOT_FOUND when there is no such
// volume. It holds the state lock, so a volume being deleted is never reported as having lost
// its image.
func (a *Appliance) imageHealth(id string) (*healthReport, error) {
	var h *healthReport
	err := a.view(func(s *state) error {
		v := s.Volumes[id]
		if v == nil {
			return notFound("volume", id)
		}
		h = a.volumeHealth(v)
		return nil
	})
	return h, err
}

// volumeHealth checks the image of v. The caller holds the state lock.
func (a *Appliance) volumeHealth(v *volume) *healthReport {
	h := newHealthReport(v.ID)
	checkImage(h, a.images.volumePath(v.ID), v.CapacityBytes)
	return h
}

// checkImage adds to h what is wrong with the image at path of a volume of capacity bytes.
// NodeGetVolumeHealth reports the same, through imageHealth: a node reads a volume through
// its image.
func checkImage(h *healthReport, path string, capacity int64) {
	name := filepath.Base(path)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		msg := fmt.Sprintf("the image %s of volume %s is gone; its data is lost: restore the volume from a snapshot", name, h.id)
		h.add(csi.VolumeHealthErrorType_INACCESSIBLE, reasonImageMissing, "%s", msg)
		h.add(csi.VolumeHealthErrorType_DATA_LOSS, reasonImageMissing, "%s", msg)
		return
	case err != nil:
		h.add(csi.VolumeHealthErrorType_INACCESSIBLE, reasonImageUnreadable, "stat the image %s of volume %s: %v; check the data directory's disk and permissions", name, h.id, err)
		return
	case !fi.Mode().IsRegular():
		// Checked before opening: opening a FIFO would block.
		h.add(csi.VolumeHealthErrorType_INACCESSIBLE, reasonImageUnreadable, "the image %s of volume %s is a %s, not a regular file; something other than this appliance replaced it", name, h.id, fi.Mode().Type())
		return
	}
	if err := readOneByte(path); err != nil {
		h.add(csi.VolumeHealthErrorType_INACCESSIBLE, reasonImageUnreadable, "read the image %s of volume %s: %v; check the data directory's disk and permissions", name, h.id, err)
	}
	if fi.Size() < capacity {
		h.add(csi.VolumeHealthErrorType_DATA_LOSS, reasonImageTruncated, "the image %s of volume %s holds %d bytes, less than the volume's %d: the data past byte %d is lost; restore the volume from a snapshot", name, h.id, fi.Size(), capacity, fi.Size())
	}
}

// readOneByte opens path and reads its first byte, which proves the file can be read. An
// empty file reads nothing and is fine here (its size tells).
func readOneByte(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(make([]byte, 1), 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// healthReport collects the adverse conditions of one volume. It keeps one entry per
// (status, reason), joining the messages of conditions that share both, since the spec
// forbids repeating a combination. Not safe for concurrent use.
type healthReport struct {
	id      string
	entries []*csi.VolumeHealth_VolumeHealthEntry
}

func newHealthReport(volumeID string) *healthReport {
	return &healthReport{id: volumeID}
}

// add records a condition of the given status and CamelCase reason.
func (h *healthReport) add(st csi.VolumeHealthErrorType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, e := range h.entries {
		if e.Status == st && e.Reason == reason {
			e.Message += "; " + msg
			return
		}
	}
	h.entries = append(h.entries, &csi.VolumeHealth_VolumeHealthEntry{Status: st, Reason: reason, Message: msg})
}

// healthy reports whether no condition was added.
func (h *healthReport) healthy() bool { return len(h.entries) == 0 }

// proto renders the report; a healthy volume gets an empty health_statuses list.
func (h *healthReport) proto() *csi.VolumeHealth {
	return &csi.VolumeHealth{VolumeId: h.id, HealthStatuses: h.entries}
}
