package initiators

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// record is a registry file: the node's ID, so that a file found by name is checked to be
// the node's (a case-insensitive file system, a hashed name), and its initiators.
type record struct {
	ID string `json:"id"`
	Node
}

// tempPattern names the files Write renames into place. They start with a dot, which no
// node's file does, so that List and Lookup never read a file being written.
const tempPattern = ".initiators-*.tmp"

// Write stores a node's initiators in the registry directory dir, as FileName(nodeID), a
// JSON object {"id": nodeID, "iqns": [...], "wwpns": [...], "nqns": [...], "networks":
// [...]}. It creates dir if needed. The file is replaced atomically (a temporary file
// written, synced and renamed, then the directory synced): a reader sees the old file or
// the new one, never a part, and concurrent writers of one node leave one whole file, the
// last renamed.
func Write(dir, nodeID string, n Node) (err error) {
	name, err := FileName(nodeID)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(record{ID: nodeID, Node: n}, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("registry %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return fmt.Errorf("registry %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil { // the controller side may read as another user
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable. File systems that cannot sync a directory say
// EINVAL or ENOTSUP; the rename stands there without it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("registry %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("registry %s: %w", dir, err)
	}
	return nil
}

// Lookup reads a node's initiators from the registry directory dir. A node without a file
// is not found (false) without error; a file that is not a registry record, or is another
// node's, is an error naming it.
func Lookup(dir, nodeID string) (Node, bool, error) {
	name, err := FileName(nodeID)
	if err != nil {
		return Node{}, false, err
	}
	path := filepath.Join(dir, name)
	rec, err := readRecord(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Node{}, false, nil
	}
	if err != nil {
		return Node{}, false, err
	}
	if rec.ID != nodeID {
		return Node{}, false, fmt.Errorf("%s: holds node %q, not %q (on a case-insensitive file system, node IDs that differ only in case share a file)", path, rec.ID, nodeID)
	}
	return rec.Node, true, nil
}

// List reads every node of the registry directory dir, by node ID. Files that are not a
// node's (other names, temporary files) are left alone; a node's file that cannot be read,
// or holds another ID than its name says, is an error naming it.
func List(dir string) (map[string]Node, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("registry %w", err)
	}
	nodes := make(map[string]Node)
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, fileExt) || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		rec, err := readRecord(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if want, err := FileName(rec.ID); err != nil || want != name {
			errs = append(errs, fmt.Errorf("%s: holds node %q, whose file is %s", path, rec.ID, want))
			continue
		}
		nodes[rec.ID] = rec.Node
	}
	return nodes, errors.Join(errs...)
}

// readRecord reads and decodes one registry file; fs.ErrNotExist passes through.
func readRecord(path string) (record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return record{}, err
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return record{}, fmt.Errorf("%s: not a node registry file: %v", path, err)
	}
	if rec.ID == "" {
		return record{}, fmt.Errorf("%s: not a node registry file: no id", path)
	}
	return rec, nil
}
