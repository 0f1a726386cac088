package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
)

// savePublishContext writes a publish context to path (nothing when path is empty) as a JSON
// object, readable by its owner only: its values may be credentials, which is why the printed
// answer redacts them and why the quick start carries them in a file, not on the terminal.
func savePublishContext(path string, pc map[string]string) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(pc)
	if err != nil {
		return err
	}
	if pc == nil {
		b = []byte("{}")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("--save-publish-context: %w", err)
	}
	if err := f.Chmod(0o600); err != nil { // an existing file keeps its mode through O_TRUNC
		f.Close()
		return fmt.Errorf("--save-publish-context: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("--save-publish-context: %w", err)
	}
	return f.Close()
}

// publishContextMap is the publish context of --publish-context-file, with the
// --publish-context entries over it; nil when neither is given.
func (f *aliasFlags) publishContextMap() (map[string]string, error) {
	flags, err := keyValues("--publish-context", f.publishContext)
	if err != nil || f.publishContextFile == "" {
		return flags, err
	}
	b, err := os.ReadFile(f.publishContextFile)
	if err != nil {
		return nil, usagef("--publish-context-file: %v", err)
	}
	pc := map[string]string{}
	if err := json.Unmarshal(b, &pc); err != nil {
		return nil, usagef("--publish-context-file %s: want a JSON object of strings, as publish --save-publish-context writes: %v", f.publishContextFile, err)
	}
	maps.Copy(pc, flags)
	return pc, nil
}
