package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var err error
	if socket := os.Getenv(backendEnv); socket != "" {
		err = runBackend(socket)
	} else if spec := os.Getenv(floorEnv); spec != "" {
		err = runFloorRelay(spec)
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run parses args, measures, prints the report on stdout and writes it to -out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	p, out, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	res, err := measure(ctx, p, stderr)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeReport(&buf, res); err != nil {
		return err
	}
	if _, err := stdout.Write(buf.Bytes()); err != nil {
		return err
	}
	if out != "" {
		return os.WriteFile(out, buf.Bytes(), 0o644)
	}
	return nil
}

// parseFlags reads the bench's flags into params, and the file to write the report to.
func parseFlags(args []string, stderr io.Writer) (params, string, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var p params
	fs.DurationVar(&p.window, "window", 1500*time.Millisecond, "one relay's measured turn at one workload and concurrency")
	fs.DurationVar(&p.warmup, "warmup", 200*time.Millisecond, "each relay's unmeasured turn before the rounds")
	fs.IntVar(&p.rounds, "rounds", 3, "rounds of turns; the report takes their medians")
	concurrency := fs.String("concurrency", "1,16,64", "comma-separated calls in flight")
	workloadNames := fs.String("workloads", allWorkloadNames(), "comma-separated workloads")
	relayNames := fs.String("relays", allRelayNames(), "comma-separated relays")
	fs.StringVar(&p.gateway, "gateway", "", "csi-gateway binary (default: build cmd/csi-gateway)")
	fs.BoolVar(&p.install, "install", true, "install haproxy and socat from Debian's packages when missing (as root)")
	fs.BoolVar(&p.redaction, "redaction", true, "run redact's "+redactionBenchmark)
	fs.StringVar(&p.redactionBenchtime, "redaction-benchtime", "300ms", "-benchtime of the redaction micro-benchmark")
	fs.IntVar(&p.redactionCount, "redaction-count", 5, "-count of the redaction micro-benchmark")
	fs.IntVar(&p.soak, "soak", 1000000, "calls of the soak through the full gateway (else passthrough) after the rounds, to see whether its heap stays flat; 0: no soak")
	out := fs.String("out", "", "also write the report to this file (e.g. docs/benchmarks.md)")
	if err := fs.Parse(args); err != nil {
		return p, "", err
	}
	if fs.NArg() > 0 {
		return p, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if p.window <= 0 || p.rounds < 1 || p.redactionCount < 1 {
		return p, "", fmt.Errorf("-window, -rounds and -redaction-count must be positive")
	}
	if p.soak < 0 {
		return p, "", fmt.Errorf("-soak: %d is negative; 0 turns the soak off", p.soak)
	}
	for _, s := range splitList(*concurrency) {
		c, err := strconv.Atoi(s)
		if err != nil || c < 1 {
			return p, "", fmt.Errorf("-concurrency: %q is not a positive number", s)
		}
		p.concurrency = append(p.concurrency, c)
	}
	var err error
	if p.workloads, err = known("-workloads", *workloadNames, allWorkloadNames()); err != nil {
		return p, "", err
	}
	if p.relays, err = known("-relays", *relayNames, allRelayNames()); err != nil {
		return p, "", err
	}
	if len(p.concurrency) == 0 || len(p.workloads) == 0 || len(p.relays) == 0 {
		return p, "", fmt.Errorf("-concurrency, -workloads and -relays must not be empty")
	}
	return p, *out, nil
}

// known splits list and checks each name is in all (comma-separated).
func known(flagName, list, all string) ([]string, error) {
	names := splitList(list)
	for _, n := range names {
		if !strings.Contains(","+all+",", ","+n+",") {
			return nil, fmt.Errorf("%s: %q is not one of %s", flagName, n, all)
		}
	}
	return names, nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func allWorkloadNames() string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return strings.Join(names, ",")
}

func allRelayNames() string {
	names := make([]string, len(relaySpecs))
	for i, s := range relaySpecs {
		names[i] = s.name
	}
	return strings.Join(names, ",")
}
