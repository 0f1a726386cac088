package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestSizeFlag: size flags take units and show their default with one; what formatSize
// writes, parseSize reads back.
func TestSizeFlag(t *testing.T) {
	for _, n := range []int64{1, 1000, 1 << 10, 1536 << 20, 1 << 40, 3 << 50, 1<<40 + 1} {
		if back, err := parseSize(formatSize(n)); err != nil || back != n {
			t.Errorf("parseSize(formatSize(%d) = %q) = %d, %v", n, formatSize(n), back, err)
		}
	}
	capacity := int64(1 << 40)
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	sizeVar(fs, &capacity, "capacity", "total size")
	if def := fs.Lookup("capacity").DefValue; def != "1Ti" {
		t.Errorf("default shown as %q, want 1Ti", def)
	}
	if err := fs.Parse([]string{"--capacity", "500Gi"}); err != nil || capacity != 500<<30 {
		t.Errorf("--capacity 500Gi = %d, %v", capacity, err)
	}
	if err := fs.Parse([]string{"--capacity", "1x"}); err == nil {
		t.Errorf("--capacity 1x was accepted")
	}
}
