package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestSizeFlag: size flags take units and show their default with one.
func TestSizeFlag(t *testing.T) {
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
