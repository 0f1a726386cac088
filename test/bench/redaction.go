package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// redactionBenchmark is package redact's micro-benchmark of the gateway's redaction against
// csi-lib-utils' protosanitizer, on the messages of the workloads.
const redactionBenchmark = "BenchmarkRedactVsProtosanitizer"

// The variants the micro-benchmark runs for each message.
const (
	variantRedact         = "Redact"
	variantRedactJSON     = "RedactJSON"
	variantProtosanitizer = "Protosanitizer"
)

// benchFigure is one variant's medians over the benchmark's runs.
type benchFigure struct {
	nsPerOp, allocsPerOp float64
}

// redactionResult is one message's figures, by variant.
type redactionResult struct {
	message string
	figures map[string]benchFigure
}

// runRedactionBenchmark runs the micro-benchmark count times for benchtime each, in this
// module's redact package.
func runRedactionBenchmark(ctx context.Context, benchtime string, count int) ([]redactionResult, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^"+redactionBenchmark+"$", "-benchmem",
		"-benchtime", benchtime, "-count", strconv.Itoa(count), "./redact")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench %s ./redact: %v\n%s", redactionBenchmark, err, out)
	}
	return parseRedactionBenchmark(string(out))
}

// benchLine matches one result line of the micro-benchmark with -benchmem.
var benchLine = regexp.MustCompile(`^` + redactionBenchmark + `/(\w+)/(\w+)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+[\d.]+ B/op\s+([\d.]+) allocs/op`)

// parseRedactionBenchmark reads `go test -bench` output: the medians of each message and
// variant, messages in the order they first appear.
func parseRedactionBenchmark(out string) ([]redactionResult, error) {
	type key struct{ message, variant string }
	ns, allocs := map[key][]float64{}, map[key][]float64{}
	var order []string
	for line := range strings.SplitSeq(out, "\n") {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		k := key{m[1], m[2]}
		if !slices.Contains(order, k.message) {
			order = append(order, k.message)
		}
		n, _ := strconv.ParseFloat(m[3], 64)
		a, _ := strconv.ParseFloat(m[4], 64)
		ns[k] = append(ns[k], n)
		allocs[k] = append(allocs[k], a)
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no %s results in:\n%s", redactionBenchmark, out)
	}
	res := make([]redactionResult, 0, len(order))
	for _, msg := range order {
		r := redactionResult{message: msg, figures: map[string]benchFigure{}}
		for _, v := range []string{variantRedact, variantRedactJSON, variantProtosanitizer} {
			k := key{msg, v}
			if len(ns[k]) == 0 {
				return nil, fmt.Errorf("%s/%s/%s: no result", redactionBenchmark, msg, v)
			}
			r.figures[v] = benchFigure{nsPerOp: median(ns[k]), allocsPerOp: median(allocs[k])}
		}
		res = append(res, r)
	}
	return res, nil
}
