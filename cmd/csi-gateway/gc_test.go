package main

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: the gateway's GC settings apply unless GOGC or GOMEMLIMIT say otherwise.
func TestTuneGC(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })

	tests := []struct {
		name                string
		env                 map[string]string
		wantPercent         int
		wantLimit, setLimit int64
	}{
		{"defaults", nil, gcPercent, memoryLimit, 1 << 40},
		{"GOGC set", map[string]string{"GOGC": "50"}, 100, memoryLimit, 1 << 40},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, gcPercent, 1 << 40, 1 << 40},
	}
	for _, tt := range tests {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(tt.setLimit)
		tuneGC(func(k string) string { return tt.env[k] })
		if got := debug.SetGCPercent(100); got != tt.wantPercent {
			t.Errorf("%s: GC percent %d, want %d", tt.name, got, tt.wantPercent)
		}
		if got := debug.SetMemoryLimit(-1); got != tt.wantLimit {
			t.Errorf("%s: memory limit %d, want %d", tt.name, got, tt.wantLimit)
		}
	}
}
