package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// params are the bench's settings.
type params struct {
	window      time.Duration // one relay's turn at one workload and concurrency
	warmup      time.Duration // unmeasured turn of each relay before the rounds of a cell
	rounds      int
	concurrency []int
	workloads   []string // names from workloads
	relays      []string // names from relaySpecs
	// gateway is the csi-gateway binary; empty: build it from this module.
	gateway string
	// install lets the bench install haproxy and socat from Debian's packages.
	install bool
	// redaction runs redact's BenchmarkRedactVsProtosanitizer, redactionCount times for
	// redactionBenchtime each.
	redaction          bool
	redactionBenchtime string
	redactionCount     int
	// soak is the number of calls of the soak; 0: no soak.
	soak int
}

// cell is one relay's figures for one workload at one concurrency, over every round.
type cell struct {
	workload    string
	concurrency int
	relay       string
	// Medians over the rounds: p50 and p99 latency in µs, calls per second.
	p50, p99, callsPerSecond float64
	calls, errors            int
	firstError               error
	// cpu is the relay's process tree's CPU over every round; zero for direct.
	cpu time.Duration
	// mallocs are the gateway's heap allocations over every round; negative when not measured.
	mallocs float64
}

// relayResult is what the report says about one relay as a whole.
type relayResult struct {
	relaySpec
	missing  string
	measured bool // it ran as a process of its own (not direct, not missing)
	ready    time.Duration
	rssIdle  int64
	rssPeak  int64
	spans    int64 // spans exported (full gateway)
	logBytes int64 // of its log file (full gateway)
}

// results are everything the report shows.
type results struct {
	params       params
	machine      machine
	relays       []relayResult
	cells        []cell
	redaction    []redactionResult
	redactionErr error
	// soak is nil when the soak did not run: soakSkipped says why.
	soak        *soakResult
	soakSkipped string
}

// measure starts the driver and the relays, runs every workload at every concurrency on every
// relay in turn, and stops them all again.
func measure(ctx context.Context, p params, progress io.Writer) (*results, error) {
	res := &results{params: p, machine: describeMachine()}
	dir, err := os.MkdirTemp("", "csibench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	gateway := p.gateway
	if gateway == "" {
		fmt.Fprintln(progress, "bench: building csi-gateway")
		if gateway, err = buildGateway(ctx, dir); err != nil {
			return nil, err
		}
	}
	var toolNames []string
	for _, n := range []string{"haproxy", "socat"} {
		if slices.Contains(p.relays, n) {
			toolNames = append(toolNames, n)
		}
	}
	tools := findTools(ctx, toolNames, p.install, progress)
	res.machine.versions = versions(ctx, gateway, tools)

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	backendSocket := filepath.Join(dir, "driver.sock")
	backend, err := startProcess(dir, "driver", []string{backendEnv + "=" + backendSocket}, self)
	if err != nil {
		return nil, err
	}
	defer backend.stop()
	if _, err := awaitProbe(ctx, backend, backendSocket, readyTimeout); err != nil {
		return nil, err
	}

	relays, err := startRelays(ctx, p.relays, dir, backendSocket, gateway, tools)
	defer func() {
		for _, r := range relays {
			r.stop()
		}
	}()
	if err != nil {
		return nil, err
	}
	var running []*relay
	for _, r := range relays {
		if r.missing == "" {
			running = append(running, r)
		}
	}

	for _, wl := range workloads {
		if !slices.Contains(p.workloads, wl.name) {
			continue
		}
		for _, c := range p.concurrency {
			fmt.Fprintf(progress, "bench: %s at concurrency %d\n", wl.name, c)
			cells, err := measureCell(ctx, p, running, wl, c)
			if err != nil {
				return nil, err
			}
			res.cells = append(res.cells, cells...)
		}
	}
	switch r := soakRelay(running); {
	case p.soak == 0:
		res.soakSkipped = "-soak 0"
	case r == nil:
		res.soakSkipped = "neither (b) passthrough nor (c) full is among -relays"
	default:
		fmt.Fprintf(progress, "bench: soak, %d calls through %s at concurrency %d\n", p.soak, r.name, soakConcurrency)
		if res.soak, err = runSoak(ctx, r, p.soak, progress); err != nil {
			return nil, err
		}
	}
	for _, r := range relays {
		rr, err := describeRelay(r)
		if err != nil {
			return nil, err
		}
		res.relays = append(res.relays, rr)
	}
	if p.redaction {
		fmt.Fprintln(progress, "bench: redaction micro-benchmark")
		res.redaction, res.redactionErr = runRedactionBenchmark(ctx, p.redactionBenchtime, p.redactionCount)
	}
	return res, nil
}

// startRelays starts the relays named, in the order; on error it returns those
// started, for the caller to stop.
func startRelays(ctx context.Context, names []string, dir, backendSocket, gateway string, tools map[string]string) ([]*relay, error) {
	var relays []*relay
	for _, spec := range relaySpecs {
		if !slices.Contains(names, spec.name) {
			continue
		}
		r, err := startRelay(ctx, spec, dir, backendSocket, gateway, tools)
		if err != nil {
			return relays, err
		}
		relays = append(relays, r)
	}
	return relays, nil
}

// measureCell runs wl at concurrency c on every relay: a warm-up turn each, then p.rounds
// rounds in which every relay has one window, the first relay of a round rotating so none is
// always first.
func measureCell(ctx context.Context, p params, relays []*relay, wl workload, c int) ([]cell, error) {
	type sums struct {
		p50, p99, cps []float64
		calls, errs   int
		first         error
		cpu           time.Duration
		mallocs       float64
	}
	acc := make([]sums, len(relays))
	for _, r := range relays {
		if p.warmup > 0 {
			runWindow(ctx, r.clients, wl, c, p.warmup)
		}
	}
	for round := range p.rounds {
		for i := range relays {
			k := (i + round) % len(relays)
			s, err := relays[k].sample(ctx, wl, c, p.window)
			if err != nil {
				return nil, err
			}
			a := &acc[k]
			a.p50 = append(a.p50, micros(percentile(s.latencies, 0.50)))
			a.p99 = append(a.p99, micros(percentile(s.latencies, 0.99)))
			a.cps = append(a.cps, s.callsPerSecond())
			a.calls += s.calls
			a.errs += s.errors
			if a.first == nil {
				a.first = s.firstError
			}
			a.cpu += s.cpu
			a.mallocs += s.mallocs
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	cells := make([]cell, len(relays))
	for k, r := range relays {
		a := acc[k]
		cells[k] = cell{
			workload: wl.name, concurrency: c, relay: r.name,
			p50: median(a.p50), p99: median(a.p99), callsPerSecond: median(a.cps),
			calls: a.calls, errors: a.errs, firstError: a.first, cpu: a.cpu, mallocs: a.mallocs,
		}
		if r.admin == "" {
			cells[k].mallocs = -1
		}
	}
	return cells, nil
}

// sample is one window and what the relay's process spent on it.
type sample struct {
	window
	cpu     time.Duration
	mallocs float64
}

// sample runs one window of wl at concurrency c on the relay, reading its CPU and (for a
// gateway) its allocation count before and after.
func (r *relay) sample(ctx context.Context, wl workload, c int, d time.Duration) (sample, error) {
	var (
		s          sample
		cpu0       time.Duration
		m0, m1     float64
		err        error
		hasProcess = r.proc != nil
	)
	if hasProcess {
		if cpu0, err = treeCPU(r.proc.pid()); err != nil {
			return s, fmt.Errorf("%s: %w", r.name, err)
		}
	}
	if r.admin != "" {
		if m0, err = scrapeMallocs(ctx, r.admin); err != nil {
			return s, fmt.Errorf("%s: %w", r.name, err)
		}
	}
	s.window = runWindow(ctx, r.clients, wl, c, d)
	if r.admin != "" {
		if m1, err = scrapeMallocs(ctx, r.admin); err != nil {
			return s, fmt.Errorf("%s: %w", r.name, err)
		}
		s.mallocs = max(m1-m0-r.scrapeMallocs, 0)
	}
	if hasProcess {
		cpu1, err := treeCPU(r.proc.pid())
		if err != nil {
			return s, fmt.Errorf("%s: %w", r.name, err)
		}
		s.cpu = cpu1 - cpu0
	}
	return s, nil
}

// describeRelay reads what a relay's process leaves at the end: its peak memory, the spans
// and log it wrote.
func describeRelay(r *relay) (relayResult, error) {
	rr := relayResult{relaySpec: r.relaySpec, missing: r.missing, measured: r.proc != nil,
		ready: r.ready, rssIdle: r.rssIdle}
	if r.proc == nil {
		return rr, nil
	}
	var err error
	if _, rr.rssPeak, err = treeMemory(r.proc.pid()); err != nil {
		return rr, fmt.Errorf("%s: %w", r.name, err)
	}
	if r.collector != nil {
		rr.spans = r.collector.spans.Load()
	}
	if fi, err := os.Stat(r.proc.logPath); err == nil {
		rr.logBytes = fi.Size()
	}
	return rr, nil
}

// buildGateway builds cmd/csi-gateway of this module into dir.
func buildGateway(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "csi-gateway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/csi-gateway/csi-gateway/cmd/csi-gateway")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build csi-gateway: %v\n%s", err, b)
	}
	return out, nil
}

// versions names the gateway's and the third-party relays' versions.
func versions(ctx context.Context, gateway string, tools map[string]string) []string {
	v := []string{toolVersion(ctx, gateway, "version")}
	if p := tools["haproxy"]; p != "" {
		v = append(v, toolVersion(ctx, p, "-v"))
	}
	if p := tools["socat"]; p != "" {
		v = append(v, toolVersion(ctx, p, "-V"))
	}
	return v
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
