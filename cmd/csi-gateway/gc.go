package main

import "runtime/debug"

// The gateway's live heap is small (a few MiB: connections, the method and route tables,
// the calls in flight), and nearly every byte it allocates dies with the call that made it.
// Go's default GOGC of 100 collects each time the heap doubles, which at a few MiB means a
// collection every few thousand calls: about a quarter of a busy gateway's CPU (issue #8's
// profiles). gcPercent lets the heap grow to five times the live heap between collections, and
// memoryLimit makes the collector work harder before the heap, whatever it holds, passes it,
// so the trade stays bounded: measured, a quarter less CPU per call, and a peak that stays
// under issue #8's 64 MiB at 64 calls in flight (docs/benchmarks.md). serve also returns
// start-up's garbage to the system once the gateway is ready.
const (
	gcPercent   = 400
	memoryLimit = 48 << 20
)

// tuneGC applies gcPercent and memoryLimit, each unless the operator set its variable (GOGC,
// GOMEMLIMIT), which the runtime has then applied already.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
