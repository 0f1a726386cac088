package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

const stateFileName = "state.json"

// loadState reads the state file in dir; a missing file is an empty state.
func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, err
	}
	s := newState()
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt: %w", filepath.Join(dir, stateFileName), err)
	}
	s.fillMaps()
	return s, nil
}

// saveState replaces the state file in dir atomically: the new content is written to a
// temporary file and synced, renamed over the old file, and the directory is synced so the
// rename itself survives a power cut. A reader (or a restart after a crash) sees either the
// old state or the new one, never a mix.
func saveState(dir string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return replaceFile(filepath.Join(dir, stateFileName), func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

// replaceFile writes a new file at path with fill, durably: into a temporary file beside it
// (mode 0600), synced, renamed over path, and the directory synced. A failure leaves path as
// it was and removes the temporary file.
func replaceFile(path string, fill func(f *os.File) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := fill(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
