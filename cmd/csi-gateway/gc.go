package main

import (
	"errors"
	"log/slog"
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The gateway's live heap is small (a few MiB: connections, the method and route tables,
// the calls in flight), and nearly every byte it allocates dies with the call that made it.
// Go's default GOGC of 100 collects each time the heap doubles, which at a few MiB means a
// collection every few thousand calls: about a quarter of a busy gateway's CPU (issue #8's
// profiles). gcPercent lets the heap grow to five times the live heap between collections, and
// a memory limit makes the collector work harder before the heap, whatever it holds, passes
// it, so the trade stays bounded. serve also returns start-up's garbage to the system once the
// gateway is ready.
//
// The limit follows the container: cgroupLimitRatio of the memory limit of the process's
// cgroup (v1 or v2), leaving the rest for what is not Go heap (stacks, the runtime, the page
// cache the kernel charges to the cgroup), so the collector works harder before the kernel
// kills the pod. Without a cgroup limit (a host process, a systemd unit without MemoryMax) it
// is defaultMemoryLimit, the setting measured in docs/benchmarks.md: a quarter less CPU per
// call, and a peak under issue #8's 64 MiB at 64 calls in flight. It is a soft limit: a
// gateway whose live heap outgrows it keeps running, at the price of more collections.
const (
	gcPercent          = 400
	defaultMemoryLimit = 48 << 20
	cgroupLimitRatio   = 0.9
)

// Where gcTuning.Limit came from.
const (
	limitFromEnv     = "GOMEMLIMIT" // the operator's, applied by the runtime
	limitFromCgroup  = "cgroup"     // cgroupLimitRatio of the cgroup's memory limit
	limitFromDefault = "default"    // defaultMemoryLimit: no cgroup limit found
)

// gcTuning is what tuneGC applied, for the start-up log line.
type gcTuning struct {
	Percent   int    // GOGC in effect
	Limit     int64  // GOMEMLIMIT in effect, in bytes
	LimitFrom string // limitFromEnv, limitFromCgroup or limitFromDefault
	Cgroup    uint64 // the cgroup's limit, with limitFromCgroup
	// NoCgroup says why no cgroup limit was used, with limitFromDefault: the cgroup sets none,
	// or it could not be read (not Linux, no memory controller).
	NoCgroup error
}

// tuneGC applies gcPercent and the memory limit, each unless the operator set its variable
// (GOGC, GOMEMLIMIT), which the runtime has then applied already. cgroupLimit reads the
// process's cgroup memory limit (memlimit.FromCgroup; memlimit.ErrNoLimit when it has none).
func tuneGC(getenv func(string) string, cgroupLimit memlimit.Provider) gcTuning {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	t := gcTuning{LimitFrom: limitFromEnv}
	if getenv("GOMEMLIMIT") == "" {
		cg, err := cgroupLimit()
		if err == nil {
			t.LimitFrom, t.Cgroup = limitFromCgroup, cg
			debug.SetMemoryLimit(limitFor(cg))
		} else {
			t.LimitFrom, t.NoCgroup = limitFromDefault, err
			debug.SetMemoryLimit(defaultMemoryLimit)
		}
	}
	t.Percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(t.Percent)
	t.Limit = debug.SetMemoryLimit(-1)
	return t
}

// limitFor is cgroupLimitRatio of a cgroup's limit, at most math.MaxInt64 (no limit).
func limitFor(cgroup uint64) int64 {
	l := float64(cgroup) * cgroupLimitRatio
	if l >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(l)
}

// LogAttrs are the fields of the gateway's `memory limit` start-up line.
func (t gcTuning) LogAttrs() []slog.Attr {
	attrs := []slog.Attr{slog.Int64("gomemlimit", t.Limit), slog.String("gomemlimit_from", t.LimitFrom), slog.Int("gogc", t.Percent)}
	switch {
	case t.LimitFrom == limitFromCgroup:
		attrs = append(attrs, slog.Uint64("cgroup_limit", t.Cgroup))
	case t.NoCgroup != nil && !errors.Is(t.NoCgroup, memlimit.ErrNoLimit):
		attrs = append(attrs, slog.String("cgroup", t.NoCgroup.Error()))
	}
	return attrs
}
