package main

import (
	"fmt"
	"slices"
	"time"
)

// The targets of issue #8, each a ratio or a bound within one run.
const (
	minCallsRatio          = 0.75     // (c) calls/s ÷ (a) calls/s at c=16 and c=64
	maxAddedP50            = 100.0    // µs (c) adds to the p50 of (a) at c=1
	maxGatewayCPU          = 20.0     // µs of gateway CPU per call at c=16
	minRedactionSpeedup    = 5.0      // protosanitizer's time ÷ the gateway's
	maxIdleRSS             = 20 << 20 // bytes
	maxPeakRSS             = 64 << 20 // bytes, at c=64
	maxReady               = 100 * time.Millisecond
	targetConcurrencyCPU   = 16
	targetConcurrencyPeak  = 64
	targetConcurrencyAdded = 1
	// The soak's live heap over its last tenth of calls may exceed that over its first by
	// this share of it plus heapGrowthSlack bytes: "heap flat over a million calls".
	maxHeapGrowth   = 0.10
	heapGrowthSlack = 1 << 20
	soakTargetCalls = 1000000
)

// targetConcurrencyCalls are the concurrencies the calls/s ratio is checked at.
var targetConcurrencyCalls = []int{16, 64}

// verdict is one target checked in one place.
type verdict struct {
	target   string
	where    string
	measured string
	result   string // met, not met, or not measured
}

func check(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

const notMeasured = "not measured"

// verdicts checks every target of issue #8 against res.
func verdicts(res *results) []verdict {
	var out []verdict
	for _, wl := range res.params.workloads {
		for _, c := range targetConcurrencyCalls {
			v := verdict{target: fmt.Sprintf("(c) calls/s ≥ %.2f × (a)", minCallsRatio), where: fmt.Sprintf("%s, c=%d", wl, c), result: notMeasured}
			full, ok1 := res.cell(wl, c, "full")
			direct, ok2 := res.cell(wl, c, "direct")
			if ok1 && ok2 && direct.callsPerSecond > 0 {
				r := full.callsPerSecond / direct.callsPerSecond
				v.measured, v.result = fmt.Sprintf("%.2f × (%.0f vs %.0f)", r, full.callsPerSecond, direct.callsPerSecond), check(r >= minCallsRatio)
			}
			out = append(out, v)
		}
	}
	for _, wl := range res.params.workloads {
		v := verdict{target: fmt.Sprintf("(c) p50 added ≤ %.0f µs", maxAddedP50), where: fmt.Sprintf("%s, c=%d", wl, targetConcurrencyAdded), result: notMeasured}
		full, ok1 := res.cell(wl, targetConcurrencyAdded, "full")
		direct, ok2 := res.cell(wl, targetConcurrencyAdded, "direct")
		if ok1 && ok2 {
			added := full.p50 - direct.p50
			v.measured, v.result = fmt.Sprintf("%.0f µs (%.0f vs %.0f)", added, full.p50, direct.p50), check(added <= maxAddedP50)
		}
		out = append(out, v)
	}
	for _, relay := range []string{"passthrough", "full"} {
		for _, wl := range res.params.workloads {
			v := verdict{target: fmt.Sprintf("gateway CPU ≤ %.0f µs/call", maxGatewayCPU), where: fmt.Sprintf("(%s) %s, c=%d", relayKey(relay), wl, targetConcurrencyCPU), result: notMeasured}
			if c, ok := res.cell(wl, targetConcurrencyCPU, relay); ok && c.calls > 0 {
				perCall := c.cpuPerCall()
				v.measured, v.result = fmt.Sprintf("%.1f µs", perCall), check(perCall <= maxGatewayCPU)
			}
			out = append(out, v)
		}
	}
	for _, r := range res.redaction {
		v := verdict{target: fmt.Sprintf("redaction ≥ %.0f× faster than protosanitizer", minRedactionSpeedup), where: r.message + " (RedactJSON)"}
		speedup := r.speedup(variantRedactJSON)
		v.measured, v.result = fmt.Sprintf("%.2f×", speedup), check(speedup >= minRedactionSpeedup)
		out = append(out, v)
	}
	if res.params.redaction && len(res.redaction) == 0 {
		out = append(out, verdict{target: fmt.Sprintf("redaction ≥ %.0f× faster than protosanitizer", minRedactionSpeedup), where: "all messages", result: notMeasured})
	}
	for _, rr := range res.relays {
		if rr.name != "passthrough" && rr.name != "full" {
			continue
		}
		where := fmt.Sprintf("(%s) %s", rr.key, rr.name)
		out = append(out,
			verdict{fmt.Sprintf("RSS idle ≤ %d MiB", maxIdleRSS>>20), where, mib(rr.rssIdle), check(rr.rssIdle <= maxIdleRSS)},
			peakVerdict(res, rr, where),
			verdict{fmt.Sprintf("ready ≤ %d ms after start", maxReady.Milliseconds()), where, millis(rr.ready), check(rr.ready <= maxReady)},
		)
	}
	return append(out, soakVerdict(res))
}

// peakVerdict checks the peak RSS, which is the peak at c=64 only when c=64 was run (it is
// the heaviest load the bench applies).
func peakVerdict(res *results, rr relayResult, where string) verdict {
	v := verdict{target: fmt.Sprintf("RSS ≤ %d MiB at c=%d", maxPeakRSS>>20, targetConcurrencyPeak), where: where, result: notMeasured}
	if slices.Contains(res.params.concurrency, targetConcurrencyPeak) {
		v.measured, v.result = mib(rr.rssPeak)+" (peak of the run)", check(rr.rssPeak <= maxPeakRSS)
	}
	return v
}

// soakVerdict checks that the gateway's live heap stayed flat over the soak.
func soakVerdict(res *results) verdict {
	v := verdict{target: "heap flat over a million calls", where: "—", result: notMeasured}
	s := res.soak
	if s == nil {
		v.measured = "no soak: " + res.soakSkipped
		return v
	}
	v.where = fmt.Sprintf("(%s) %s", relayKey(s.relay), s.relay)
	if !s.measured() {
		v.measured = fmt.Sprintf("no heap sample in the first or the last tenth of %d calls", s.calls)
		return v
	}
	v.measured = fmt.Sprintf("first 10%%: %s, last 10%%: %s over %d calls", mib(s.firstHeap), mib(s.lastHeap), s.calls)
	v.result = check(s.flat())
	if s.calls < soakTargetCalls {
		v.result += " (a shorter soak than the target's)"
	}
	return v
}

// cell returns the figures of relay for workload at concurrency c.
func (res *results) cell(workload string, c int, relay string) (cell, bool) {
	for _, x := range res.cells {
		if x.workload == workload && x.concurrency == c && x.relay == relay {
			return x, true
		}
	}
	return cell{}, false
}

// cpuPerCall is the relay's CPU per call in µs.
func (c cell) cpuPerCall() float64 {
	if c.calls == 0 {
		return 0
	}
	return micros(c.cpu) / float64(c.calls)
}

// speedup is protosanitizer's time over the variant's.
func (r redactionResult) speedup(variant string) float64 {
	if r.figures[variant].nsPerOp == 0 {
		return 0
	}
	return r.figures[variantProtosanitizer].nsPerOp / r.figures[variant].nsPerOp
}

// relayKey returns the letter of the relay called name.
func relayKey(name string) string {
	for _, s := range relaySpecs {
		if s.name == name {
			return s.key
		}
	}
	return "?"
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func millis(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
