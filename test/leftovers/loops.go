package main

import (
	"fmt"
	"path/filepath"
)

// loop is an attached loop device: /sys/block/loopN/loop exists only while one is.
type loop struct {
	name, backing string
}

func (l loop) key() string { return l.name + " " + l.backing }

func (l loop) String() string { return fmt.Sprintf("loop /dev/%s backing %s", l.name, l.backing) }

func (h host) readLoops() ([]loop, error) {
	files, err := filepath.Glob(h.path("sys/block/loop*/loop/backing_file"))
	if err != nil {
		return nil, err
	}
	var out []loop
	for _, f := range files {
		if backing := readFileTrim(f); backing != "" {
			out = append(out, loop{name: filepath.Base(filepath.Dir(filepath.Dir(f))), backing: backing})
		}
	}
	return out, nil
}
