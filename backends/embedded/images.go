package embedded

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// images manages the data files: one sparse image per volume and per snapshot. Every image
// is written under a temporary name, synced and renamed, so an image either exists whole or
// not at all.
type images struct {
	volumesDir   string
	snapshotsDir string
}

const imageSuffix = ".img"

func newImages(dataDir string) (*images, error) {
	im := &images{
		volumesDir:   filepath.Join(dataDir, "volumes"),
		snapshotsDir: filepath.Join(dataDir, "snapshots"),
	}
	for _, d := range []string{dataDir, im.volumesDir, im.snapshotsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return im, nil
}

func (im *images) volumePath(id string) string {
	return filepath.Join(im.volumesDir, id+imageSuffix)
}

func (im *images) snapshotPath(id string) string {
	return filepath.Join(im.snapshotsDir, id+imageSuffix)
}

// create makes an image of size bytes at path: a copy of src when src is not empty, sparse
// zeros otherwise. An image already at path is replaced.
func (im *images) create(path, src string, size int64) error {
	return replaceFile(path, func(f *os.File) error {
		if src != "" {
			if err := copySparse(f, src); err != nil {
				return fmt.Errorf("copy %s: %w", filepath.Base(src), err)
			}
		}
		return f.Truncate(size)
	})
}

// grow extends the image at path to size bytes; it never shrinks one.
func (im *images) grow(path string, size int64) error {
	f, fi, err := openStat(path, os.O_RDWR)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi.Size() >= size {
		return nil
	}
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

// remove deletes the image at path; a missing image is not an error.
func (im *images) remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// removeDeletedImages removes the images of the volumes or snapshots (kind) ids, whose records
// the state no longer names. An image it cannot remove is logged, with attrs, and removed at
// the next start (collectGarbage).
func (a *Appliance) removeDeletedImages(kind string, path func(id string) string, ids []string, attrs ...any) {
	for _, id := range ids {
		if err := a.images.remove(path(id)); err != nil {
			a.log.Warn(kind+" deleted but its image stays until the next start", append([]any{kind + "_id", id, "error", err}, attrs...)...)
		}
	}
}

// collectGarbage removes every file in the image folders that is not the image of a live
// volume or snapshot: leftovers of a create or delete that a crash cut short. It returns the
// names it removed.
func (im *images) collectGarbage(s *state) ([]string, error) {
	var removed []string
	sweep := func(dir string, live func(id string) bool) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			id, isImage := strings.CutSuffix(e.Name(), imageSuffix)
			if isImage && live(id) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
			removed = append(removed, filepath.Join(filepath.Base(dir), e.Name()))
		}
		return nil
	}
	if err := sweep(im.volumesDir, func(id string) bool { return s.Volumes[id] != nil }); err != nil {
		return removed, err
	}
	err := sweep(im.snapshotsDir, func(id string) bool { return s.Snapshots[id] != nil })
	return removed, err
}

// openStat opens path with flag and returns the file, which the caller closes, with what it
// is.
func openStat(path string, flag int) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// copySparse copies src into dst extent by extent, so holes stay holes: a 10 GiB sparse
// image with 1 MiB of data costs 1 MiB to copy.
func copySparse(dst *os.File, src string) error {
	in, fi, err := openStat(src, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer in.Close()
	size := fi.Size()
	fd := int(in.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) { // no data after off: the rest is a hole
			break
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := dst.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(dst, in, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return dst.Truncate(size)
}
