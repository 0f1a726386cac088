package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain serves the benchmark driver, or the floor relay, when the harness re-executes the
// test binary for it.
func TestMain(m *testing.M) {
	var err error
	switch {
	case os.Getenv(backendEnv) != "":
		err = runBackend(os.Getenv(backendEnv))
	case os.Getenv(floorEnv) != "":
		err = runFloorRelay(os.Getenv(floorEnv))
	default:
		os.Exit(m.Run())
	}
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestTinyRun runs the whole harness for a few seconds: every workload, two concurrencies,
// every relay that is installed (it installs nothing), a soak of tinySoak calls, and checks
// that every call succeeded and the report's tables parse. It asserts no timing.
func TestTinyRun(t *testing.T) {
	relays := []string{"direct", "passthrough", "full", "passthrough-frames", "full-frames", "floor"}
	for _, tool := range []string{"haproxy", "socat"} {
		if _, err := exec.LookPath(tool); err == nil {
			relays = append(relays, tool)
		}
	}
	out := filepath.Join(t.TempDir(), "benchmarks.md")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const tinySoak = 2000
	err := run(ctx, []string{"-window", "100ms", "-warmup", "0", "-rounds", "1", "-concurrency", "1,2",
		"-relays", strings.Join(relays, ","), "-install=false", "-redaction=false", "-soak", strconv.Itoa(tinySoak),
		"-out", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(written, stdout.Bytes()) {
		t.Error("the report written to -out differs from the one printed")
	}
	report := string(written)

	rows := parseTable(t, report, resultsHeader)
	if want := len(workloads) * 2 * len(relays); len(rows) != want {
		t.Fatalf("%d result rows, want %d:\n%s", len(rows), want, report)
	}
	for _, row := range rows {
		what := row["workload"] + " c=" + row["c"] + " " + row["relay"]
		if row["errors"] != "0" {
			t.Errorf("%s: %s errors", what, row["errors"])
		}
		for _, col := range []string{"p50 µs", "p99 µs", "calls/s"} {
			if v, err := strconv.ParseFloat(row[col], 64); err != nil || v <= 0 {
				t.Errorf("%s: %s is %q, want a positive number", what, col, row[col])
			}
		}
		direct := strings.HasSuffix(row["relay"], " direct")
		gateway := strings.Contains(row["relay"], " passthrough") || strings.Contains(row["relay"], " full")
		for _, col := range []string{"relay CPU µs/call", "allocs/call"} {
			_, err := strconv.ParseFloat(row[col], 64)
			switch {
			case direct && row[col] != "—":
				t.Errorf("%s: %s is %q, want —", what, col, row[col])
			case gateway && err != nil:
				t.Errorf("%s: %s is %q, want a number", what, col, row[col])
			}
		}
	}

	procs := parseTable(t, report, "| relay | ready | RSS idle | RSS peak | notes |")
	if len(procs) != len(relays) {
		t.Errorf("%d relay rows, want %d", len(procs), len(relays))
	}
	for _, row := range procs {
		if strings.Contains(row["relay"], " full") && !strings.Contains(row["notes"], "spans exported") {
			t.Errorf("%s: notes %q say nothing of its spans", row["relay"], row["notes"])
		}
	}

	pairs := parseTable(t, report, transportsHeader)
	if want := len(workloads) * 2 * len(transportPairs); len(pairs) != want {
		t.Errorf("%d transport rows, want %d", len(pairs), want)
	}
	for _, row := range pairs {
		for _, col := range []string{"grpc-go CPU µs/call", "frames CPU µs/call"} {
			if _, err := strconv.ParseFloat(row[col], 64); err != nil {
				t.Errorf("transports, %s c=%s %s: %s is %q, want a number", row["workload"], row["c"], row["relays"], col, row[col])
			}
		}
	}
	soak := parseTable(t, report, soakHeader)
	if len(soak) != 1 {
		t.Fatalf("%d soak rows, want 1", len(soak))
	}
	if row := soak[0]; row["relay"] != "(c) full" || row["calls"] != strconv.Itoa(tinySoak) || row["errors"] != "0" {
		t.Errorf("soak: relay %q, %s calls, %s errors; want (c) full, %d calls, 0 errors", row["relay"], row["calls"], row["errors"], tinySoak)
	}
	for _, col := range []string{"live heap, first 10%", "live heap, last 10%", "peak RSS"} {
		mib, _, _ := strings.Cut(soak[0][col], " MiB")
		if v, err := strconv.ParseFloat(mib, 64); err != nil || v <= 0 {
			t.Errorf("soak: %s is %q, want a positive number of MiB", col, soak[0][col])
		}
	}

	targets := parseTable(t, report, "| target | where | measured | result |")
	if len(targets) == 0 {
		t.Error("no targets")
	}
	var heapFlat map[string]string
	for _, row := range targets {
		if row["target"] == "heap flat over a million calls" {
			heapFlat = row
		}
	}
	var first, last float64
	var calls int
	switch {
	case heapFlat == nil:
		t.Error("no target row for the soak")
	case heapFlat["where"] != "(c) full" || !strings.HasSuffix(heapFlat["result"], " (a shorter soak than the target's)"):
		t.Errorf("soak target: where %q, result %q; want (c) full, met or not met", heapFlat["where"], heapFlat["result"])
	default:
		n, err := fmt.Sscanf(heapFlat["measured"], "first 10%%: %f MiB, last 10%%: %f MiB over %d calls", &first, &last, &calls)
		if err != nil || n != 3 || calls != tinySoak {
			t.Errorf("soak target: measured %q does not parse (%v) or names not %d calls", heapFlat["measured"], err, tinySoak)
		}
	}
}

// parseTable returns the rows of the Markdown table whose header line is header, each as a
// map from column name to cell.
func parseTable(t *testing.T, doc, header string) []map[string]string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	start := -1
	for i, l := range lines {
		if l == header {
			start = i
		}
	}
	if start < 0 || start+1 >= len(lines) || !strings.HasPrefix(lines[start+1], "|---") {
		t.Fatalf("no table with header %q in:\n%s", header, doc)
	}
	cols := cells(header)
	var rows []map[string]string
	for _, l := range lines[start+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		c := cells(l)
		if len(c) != len(cols) {
			t.Fatalf("row %q has %d cells, want %d", l, len(c), len(cols))
		}
		row := map[string]string{}
		for i, name := range cols {
			row[name] = c[i]
		}
		rows = append(rows, row)
	}
	return rows
}

func cells(line string) []string {
	parts := strings.Split(strings.Trim(line, "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}
