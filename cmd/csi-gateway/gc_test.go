package main

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestTuneGC: the gateway's GC settings apply unless GOGC or GOMEMLIMIT say otherwise; the
// memory limit is 90% of the cgroup's, or the default without one.
func TestTuneGC(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })

	const mib = 1 << 20
	noLimit := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	unreadable := func() (uint64, error) { return 0, memlimit.ErrCgroupsNotSupported }
	tests := []struct {
		name                string
		env                 map[string]string
		cgroup              memlimit.Provider
		wantPercent         int
		wantLimit, setLimit int64
		wantFrom            string
	}{
		{"no cgroup limit: the default", nil, noLimit, gcPercent, defaultMemoryLimit, 1 << 40, limitFromDefault},
		{"cgroups unreadable: the default", nil, unreadable, gcPercent, defaultMemoryLimit, 1 << 40, limitFromDefault},
		{"cgroup limit 256 MiB", nil, memlimit.Limit(256 * mib), gcPercent, 256 * mib * 9 / 10, 1 << 40, limitFromCgroup},
		{"cgroup limit past int64", nil, memlimit.Limit(math.MaxUint64), gcPercent, math.MaxInt64, 1 << 40, limitFromCgroup},
		{"GOGC set", map[string]string{"GOGC": "50"}, noLimit, 100, defaultMemoryLimit, 1 << 40, limitFromDefault},
		{"GOMEMLIMIT set wins over the cgroup", map[string]string{"GOMEMLIMIT": "1GiB"}, memlimit.Limit(256 * mib), gcPercent, 1 << 40, 1 << 40, limitFromEnv},
	}
	for _, tt := range tests {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(tt.setLimit)
		got := tuneGC(func(k string) string { return tt.env[k] }, tt.cgroup)
		if got.Percent != tt.wantPercent || got.Limit != tt.wantLimit || got.LimitFrom != tt.wantFrom {
			t.Errorf("%s: tuneGC = %+v, want percent %d, limit %d from %s", tt.name, got, tt.wantPercent, tt.wantLimit, tt.wantFrom)
		}
		if p := debug.SetGCPercent(100); p != tt.wantPercent {
			t.Errorf("%s: GC percent %d, want %d", tt.name, p, tt.wantPercent)
		}
		if l := debug.SetMemoryLimit(-1); l != tt.wantLimit {
			t.Errorf("%s: memory limit %d, want %d", tt.name, l, tt.wantLimit)
		}
	}
}

// TestTuneGCReadsNoCgroupWhenGOMEMLIMITIsSet: the operator's GOMEMLIMIT makes the cgroup
// irrelevant, so it is not read.
func TestTuneGCReadsNoCgroupWhenGOMEMLIMITIsSet(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	tuneGC(func(k string) string { return map[string]string{"GOMEMLIMIT": "1GiB"}[k] }, func() (uint64, error) {
		t.Error("the cgroup was read although GOMEMLIMIT is set")
		return 0, errors.New("read")
	})
}
