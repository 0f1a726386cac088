package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestTransportsTable: each default-transport gateway cell is paired with its frames twin at
// the same workload and concurrency; a cell without a twin is left out, a grpc-go cell with no
// CPU measured shows no saving, and the summary takes the median of the savings per pair.
func TestTransportsTable(t *testing.T) {
	cpu := func(relay string, c int, perCall time.Duration) cell {
		return cell{workload: "Probe", concurrency: c, relay: relay, calls: 100, cpu: 100 * perCall, mallocs: -1}
	}
	res := &results{cells: []cell{
		cpu("passthrough", 1, 100*time.Microsecond), cpu("passthrough-frames", 1, 80*time.Microsecond),
		cpu("passthrough", 16, 50*time.Microsecond), cpu("passthrough-frames", 16, 60*time.Microsecond),
		cpu("passthrough", 64, 0), cpu("passthrough-frames", 64, 10*time.Microsecond),
		cpu("full", 1, 200*time.Microsecond), // no full-frames cell: no row
	}}
	var buf bytes.Buffer
	p := &printer{w: &buf}
	writeTransports(p, res)
	if p.err != nil {
		t.Fatal(p.err)
	}
	report := buf.String()
	rows := parseTable(t, report, transportsHeader)
	var saves []string
	for _, r := range rows {
		saves = append(saves, r["c"]+":"+r["frames saves"])
	}
	if got, want := strings.Join(saves, " "), "1:20% 16:-20% 64:—"; got != want {
		t.Errorf("savings %q, want %q", got, want)
	}
	want := "- (g) passthrough-frames against (b) passthrough: frames saves a median 0% of the CPU per call over 2 cells (from -20% to 20%)."
	if !strings.Contains(report, want) {
		t.Errorf("no summary %q in:\n%s", want, report)
	}
	if strings.Contains(report, "full-frames against") {
		t.Errorf("a summary for full, which has no frames twin:\n%s", report)
	}

	buf.Reset()
	writeTransports(p, &results{cells: []cell{cpu("passthrough", 1, time.Microsecond)}})
	if buf.Len() != 0 {
		t.Errorf("a Transports section with no pair: %q", buf.String())
	}
}
