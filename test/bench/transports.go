package main

import (
	"fmt"
	"slices"
)

// transportPairs are the gateway relays on the default transport, grpc-go, each with the same
// features on the frame transport: (b) and (g), (c) and (h).
var transportPairs = []struct{ grpc, frames string }{
	{"passthrough", "passthrough-frames"},
	{"full", "full-frames"},
}

// transportsHeader is the header row of the transports' table; the harness's test parses it.
const transportsHeader = "| workload | c | relays | grpc-go CPU µs/call | frames CPU µs/call | frames saves | grpc-go allocs/call | frames allocs/call |"

// transportRow is one workload at one concurrency with one feature set, on both transports.
type transportRow struct {
	workload     string
	concurrency  int
	grpc, frames cell
}

// saving is the share of grpc-go's CPU per call that frames does without, 1 − frames ÷
// grpc-go; false when grpc-go's CPU was not measured (below one 10 ms tick).
func (r transportRow) saving() (float64, bool) {
	g := r.grpc.cpuPerCall()
	if g == 0 {
		return 0, false
	}
	return 1 - r.frames.cpuPerCall()/g, true
}

// transportRows pairs every cell of a default-transport gateway with its frames twin.
func transportRows(res *results) []transportRow {
	var rows []transportRow
	for _, c := range res.cells {
		for _, pair := range transportPairs {
			if c.relay != pair.grpc {
				continue
			}
			if f, ok := res.cell(c.workload, c.concurrency, pair.frames); ok {
				rows = append(rows, transportRow{workload: c.workload, concurrency: c.concurrency, grpc: c, frames: f})
			}
		}
	}
	return rows
}

// writeTransports shows what the default transport costs: the gateway's CPU per call on
// grpc-go beside the same on frames, within the run. It writes nothing when no pair ran.
func writeTransports(p *printer, res *results) {
	rows := transportRows(res)
	if len(rows) == 0 {
		return
	}
	p.line("## Transports")
	p.line("")
	p.line("The gateway's CPU per call on grpc-go (`transport: grpc`, the default) beside the same features")
	p.line("on its own HTTP/2 transport (`transport: frames`): (b) against (g), (c) against (h), from the windows")
	p.line("above. **frames saves** is 1 − frames ÷ grpc-go. Compare CPU per call rather than calls/s: on a")
	p.line("loaded machine other work moves throughput and latency far more than the work a call costs.")
	p.line("")
	p.line(transportsHeader)
	p.line("|---|--:|---|--:|--:|--:|--:|--:|")
	savings := map[string][]float64{} // by the grpc-go relay's name
	for _, r := range rows {
		saves := "—"
		if s, ok := r.saving(); ok {
			savings[r.grpc.relay] = append(savings[r.grpc.relay], s)
			saves = fmt.Sprintf("%.0f%%", 100*s)
		}
		p.line("| %s | %d | (%s) %s vs (%s) %s | %.1f | %.1f | %s | %s | %s |", r.workload, r.concurrency,
			relayKey(r.grpc.relay), r.grpc.relay, relayKey(r.frames.relay), r.frames.relay,
			r.grpc.cpuPerCall(), r.frames.cpuPerCall(), saves, r.grpc.allocsPerCall(), r.frames.allocsPerCall())
	}
	p.line("")
	for _, pair := range transportPairs {
		if s := savings[pair.grpc]; len(s) > 0 {
			p.line("- (%s) %s against (%s) %s: frames saves a median %.0f%% of the CPU per call over %d cells (from %.0f%% to %.0f%%).",
				relayKey(pair.frames), pair.frames, relayKey(pair.grpc), pair.grpc, 100*median(s), len(s), 100*slices.Min(s), 100*slices.Max(s))
		}
	}
	p.line("")
}

// allocsPerCall formats the gateway's heap allocations per call; n/a when not measured.
func (c cell) allocsPerCall() string {
	if c.mallocs < 0 || c.calls == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", c.mallocs/float64(c.calls))
}
