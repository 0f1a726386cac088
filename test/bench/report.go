package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// resultsHeader is the header row of the main table; the harness's test parses the table by it.
const resultsHeader = "| workload | c | relay | p50 µs | p99 µs | calls/s | calls/s ÷ (a) | p50 − (a) µs | relay CPU µs/call | allocs/call | errors |"

// soakHeader is the header row of the soak's table, which the harness's test parses too.
const soakHeader = "| relay | calls | errors | duration | calls/s | live heap, first 10% | live heap, last 10% | growth | peak RSS |"

// writeReport writes res as Markdown.
func writeReport(w io.Writer, res *results) error {
	p := &printer{w: w}
	p.line("# Benchmarks")
	p.line("")
	p.line("Written by `make bench` (the program in [test/bench](../test/bench), issue #8): do not edit by hand.")
	p.line("Every figure comes from one run; compare relays with each other, within the run, rather than")
	p.line("with figures from another machine or day.")
	p.line("")
	writeMachine(p, res.machine)
	writeMethod(p, res)
	writeResults(p, res)
	writeTransports(p, res)
	writeRelays(p, res)
	writeSoak(p, res)
	writeRedaction(p, res)
	writeTargets(p, res)
	return p.err
}

// printer writes lines; the first error sticks and stops the rest.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

func writeMachine(p *printer, m machine) {
	p.line("## Machine")
	p.line("")
	p.line("| | |")
	p.line("|---|---|")
	p.line("| date | %s |", m.date.Format(time.RFC3339))
	p.line("| CPU | %s, %d cores |", m.cpu, m.cores)
	p.line("| memory | %s |", m.memory)
	p.line("| kernel | %s |", m.kernel)
	p.line("| Go | %s |", m.goVersion)
	p.line("| load average at start | %s |", m.loadAvg)
	for _, v := range m.versions {
		p.line("| version | %s |", v)
	}
	p.line("")
	if m.load1 > loadedAbove {
		p.line("**Loaded machine:** the 1-minute load average was %.2f when the bench started (above %.1f):", m.load1, loadedAbove)
		p.line("other work was running, and shares the CPUs with the client, the driver and the relays.")
		p.line("")
	}
}

func writeMethod(p *printer, res *results) {
	pr := res.params
	p.line("## Method")
	p.line("")
	p.line("- Three kinds of process: the client (the bench), one CSI driver answering from memory (the")
	p.line("  bench re-executed: no disk, no mounts), and each relay in front of that driver, on Unix sockets:")
	for _, s := range relaySpecs {
		p.line("  - (%s) **%s**: %s.", s.key, s.name, s.description)
	}
	p.line("- Workloads: Probe; CreateVolume with secrets, a mount capability with flags, parameters and")
	p.line("  topology; ListVolumes answered with 100 entries; NodePublishVolume with secrets and volume and")
	p.line("  publish contexts; a GetMetadataAllocated stream of 4 responses of 32 blocks (latency to the end")
	p.line("  of the stream). Each worker asks about its own object, so the gateway never joins calls.")
	p.line("- Schedule: for each workload and concurrency (%s), a %v warm-up turn per relay, then rounds (%d) in",
		joinInts(pr.concurrency), pr.warmup, pr.rounds)
	p.line("  which every relay runs for %v in turn (the first relay rotates each round). One HTTP/2", pr.window)
	p.line("  connection per relay; concurrency is the number of calls in flight on it.")
	p.line("- p50, p99 and calls/s are the medians of the rounds, of the calls that succeeded (failed calls")
	p.line("  are counted under errors, and listed under the table). CPU per call is the relay's CPU over all")
	p.line("  its windows (utime+stime of its process tree from /proc, 10 ms ticks) divided by its calls.")
	p.line("  Allocations per call are the gateway's `csigw_go_memstats_mallocs_total` (its /metrics) over its")
	p.line("  windows, less what a scrape allocates, divided by its calls; n/a for haproxy and socat.")
	p.line("- RSS is VmRSS (idle: after start and one Probe) and VmHWM (peak, at the end of the run),")
	p.line("  summed over the relay's process tree. Ready is the time from exec to the first Probe answered")
	p.line("  on the relay's socket (polled every millisecond with a new connection).")
	p.line("- Tracing in (c) and (h): spans go as in production, batched over OTLP/gRPC, to a collector the bench")
	p.line("  runs on loopback (it counts them and keeps none; its CPU is the bench's, not the relay's).")
	p.line("  The gateway pays protobuf encoding and the export calls, which an in-memory exporter would not.")
	if pr.soak > 0 {
		p.line("- Soak: after the rounds, %d calls through (c) full (through (b) passthrough when (c) is not", pr.soak)
		p.line("  run) at concurrency %d on its connection, each worker repeating, per %d calls,", soakConcurrency, len(soakMix))
		p.line("  %s", soakMixCounts())
		p.line("  (CreateVolume and NodePublishVolume cycle through %d objects of the worker's own). Every", soakNames)
		p.line("  %v the bench reads the gateway's `%s` (its /metrics) and its", soakSampleEvery, heapAllocMetric)
		p.line("  RSS. Right after a collection the heap falls to what is live, so the least reading over a")
		p.line("  stretch of calls estimates the live heap; the bench takes it over the first and the last %d%%", 100/soakWindowShare)
		p.line("  of the calls. **Flat** means last ≤ first × %.2f + %d MiB. Peak RSS is the greatest VmRSS", 1+maxHeapGrowth, heapGrowthSlack>>20)
		p.line("  read during the soak.")
	}
	p.line("")
}

func writeResults(p *printer, res *results) {
	p.line("## Results")
	p.line("")
	p.line(resultsHeader)
	p.line("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range res.cells {
		direct, hasDirect := res.cell(c.workload, c.concurrency, "direct")
		ratio, added := "—", "—"
		if hasDirect && c.relay != "direct" {
			if direct.callsPerSecond > 0 {
				ratio = fmt.Sprintf("%.2f", c.callsPerSecond/direct.callsPerSecond)
			}
			added = fmt.Sprintf("%.0f", c.p50-direct.p50)
		}
		cpu, allocs := "—", "—"
		if c.relay != "direct" {
			cpu = fmt.Sprintf("%.1f", c.cpuPerCall())
			allocs = c.allocsPerCall()
		}
		p.line("| %s | %d | (%s) %s | %s | %s | %.0f | %s | %s | %s | %s | %d |", c.workload, c.concurrency,
			relayKey(c.relay), c.relay, latency(c.p50), latency(c.p99), c.callsPerSecond, ratio, added, cpu, allocs, c.errors)
	}
	p.line("")
	failed := false
	for _, c := range res.cells {
		if c.firstError != nil {
			p.line("- %s, c=%d, (%s) %s: %d calls failed, the first with `%v`", c.workload, c.concurrency,
				relayKey(c.relay), c.relay, c.errors, c.firstError)
			failed = true
		}
	}
	if failed {
		p.line("")
	}
}

func writeRelays(p *printer, res *results) {
	p.line("## Relay processes")
	p.line("")
	p.line("| relay | ready | RSS idle | RSS peak | notes |")
	p.line("|---|--:|--:|--:|---|")
	for _, r := range res.relays {
		name := fmt.Sprintf("(%s) %s", r.key, r.name)
		switch {
		case r.missing != "":
			p.line("| %s | — | — | — | %s |", name, r.missing)
		case !r.measured:
			p.line("| %s | — | — | — | no process |", name)
		default:
			var notes []string
			if r.traced() {
				notes = append(notes, fmt.Sprintf("%d spans exported, %.1f MiB of logs", r.spans, float64(r.logBytes)/(1<<20)))
			}
			p.line("| %s | %s | %s | %s | %s |", name, millis(r.ready), mib(r.rssIdle), mib(r.rssPeak), strings.Join(notes, "; "))
		}
	}
	p.line("")
}

func writeSoak(p *printer, res *results) {
	if res.params.soak == 0 {
		return
	}
	p.line("## Soak")
	p.line("")
	s := res.soak
	if s == nil {
		p.line("Not run: %s.", res.soakSkipped)
		p.line("")
		return
	}
	first, last, growth := "—", "—", "—"
	if s.firstHeap >= 0 {
		first = fmt.Sprintf("%s (least of %d)", mib(s.firstHeap), s.firstSamples)
	}
	if s.lastHeap >= 0 {
		last = fmt.Sprintf("%s (least of %d)", mib(s.lastHeap), s.lastSamples)
	}
	if s.measured() {
		d := s.lastHeap - s.firstHeap
		growth = fmt.Sprintf("%+.1f MiB", float64(d)/(1<<20))
		if s.firstHeap > 0 {
			growth += fmt.Sprintf(" (%+.0f%%)", 100*float64(d)/float64(s.firstHeap))
		}
	}
	cps := 0.0
	if s.elapsed > 0 {
		cps = float64(s.calls) / s.elapsed.Seconds()
	}
	p.line("%s", soakHeader)
	p.line("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	p.line("| (%s) %s | %d | %d | %.1f s | %.0f | %s | %s | %s | %s |", relayKey(s.relay), s.relay, s.calls, s.errors,
		s.elapsed.Seconds(), cps, first, last, growth, mib(s.peakRSS))
	p.line("")
	if s.firstError != nil {
		p.line("- %d calls failed, the first with `%v`", s.errors, s.firstError)
		p.line("")
	}
}

func writeRedaction(p *printer, res *results) {
	if !res.params.redaction {
		return
	}
	p.line("## Redaction micro-benchmark")
	p.line("")
	p.line("redact's `%s` (`go test -bench`, -benchtime %s, -count %d, medians) on the workloads'",
		redactionBenchmark, res.params.redactionBenchtime, res.params.redactionCount)
	p.line("messages (ListVolumes100 is the response). **Redact** is the gateway's redacted copy;")
	p.line("**RedactJSON** that copy formatted as JSON, as a debug log line carries it; **protosanitizer** is")
	p.line("csi-lib-utils v0.25.0 `StripSecrets(m).String()`, the JSON the Kubernetes sidecars log (it")
	p.line("leaves mount flags and context values in clear). RedactJSON and protosanitizer produce the same")
	p.line("kind of thing, a loggable string, so the target is checked on RedactJSON.")
	p.line("")
	if res.redactionErr != nil {
		p.line("Not run: `%v`", res.redactionErr)
		p.line("")
		return
	}
	p.line("| message | Redact ns | RedactJSON ns | protosanitizer ns | Redact allocs | RedactJSON allocs | protosanitizer allocs | speed-up of Redact | speed-up of RedactJSON |")
	p.line("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range res.redaction {
		f := r.figures
		p.line("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f× | %.2f× |", r.message,
			f[variantRedact].nsPerOp, f[variantRedactJSON].nsPerOp, f[variantProtosanitizer].nsPerOp,
			f[variantRedact].allocsPerOp, f[variantRedactJSON].allocsPerOp, f[variantProtosanitizer].allocsPerOp,
			r.speedup(variantRedact), r.speedup(variantRedactJSON))
	}
	p.line("")
}

func writeTargets(p *printer, res *results) {
	p.line("## Targets")
	p.line("")
	p.line("Issue #8's targets, each a ratio or a bound within this run. Recorded here, not asserted by any test.")
	p.line("")
	p.line("| target | where | measured | result |")
	p.line("|---|---|---|---|")
	for _, v := range verdicts(res) {
		p.line("| %s | %s | %s | %s |", v.target, v.where, v.measured, v.result)
	}
}

// latency formats µs: whole above 100, one decimal below.
func latency(us float64) string {
	if us >= 100 {
		return fmt.Sprintf("%.0f", us)
	}
	return fmt.Sprintf("%.1f", us)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
