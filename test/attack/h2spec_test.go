package attack

import (
	"bufio"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestH2spec runs h2spec (HTTP/2 conformance, pinned in go.mod's tool directive) against the
// real binary's plaintext TCP listener on each transport, and compares its failures with
// h2spec-expected.txt: the cases a gRPC server answers differently, each with its reason. A
// failure not on the list fails the test; a listed case that passes is logged, so that the
// list can shrink.
func TestH2spec(t *testing.T) {
	t.Parallel() // with TestAttacks
	bin := os.Getenv("H2SPEC")
	if bin == "" {
		t.Skip("SKIPPED: H2SPEC is not set. `make test` builds h2spec (pinned in go.mod) into .tools/bin and sets it; " +
			"by hand: go build -o .tools/bin/h2spec github.com/summerwind/h2spec/cmd/h2spec && H2SPEC=$PWD/.tools/bin/h2spec go test ./test/attack -run H2spec")
	}
	expected := readExpected(t, "h2spec-expected.txt")
	// Both transports' runs at once: h2spec waits out its timeout on every case that fails,
	// so one run takes most of a minute however fast the gateway answers.
	reports := make([]chan h2specResult, len(transports))
	for i, transport := range transports {
		addr := freePort(t)
		g := startGateway(t, transport, defaultLimits, fmt.Sprintf("  - endpoint: tcp://%s\n    insecure: true\n", addr))
		report := filepath.Join(t.TempDir(), "h2spec-"+transport+".xml")
		reports[i] = make(chan h2specResult, 1)
		go func() { reports[i] <- runH2spec(bin, g, addr, report) }()
	}
	for i, transport := range transports {
		r := <-reports[i]
		t.Run(transport, func(t *testing.T) {
			if r.err != nil {
				t.Fatal(r.err)
			}
			compareH2spec(t, transport, r.cases, expected)
		})
	}
}

// h2specCase is one h2spec case's result: its ID as h2spec's command line takes it
// ("http2/5.1/3"), its description, and why it failed (empty when it passed).
type h2specCase struct {
	id, desc, failure string
	skipped           bool
}

type h2specResult struct {
	cases []h2specCase
	err   error
}

// runH2spec runs h2spec against g's plaintext listener addr, writing its JUnit report to
// report, and parses the report. It runs on a goroutine of its own: it reports, never fails.
func runH2spec(bin string, g *gateway, addr, report string) h2specResult {
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// -o 2: each case waits 2 s for an answer (h2spec's default); a refusal takes milliseconds.
	out, err := exec.CommandContext(ctx, bin, "-h", host, "-p", port, "-o", "2", "-j", report).CombinedOutput()
	cases, perr := parseJUnit(report)
	if perr != nil {
		return h2specResult{err: fmt.Errorf("h2spec (%v): %v\n%s\ngateway output:\n%s", err, perr, tail(string(out), 4000), tail(g.proc.Output(), 4000))}
	}
	if err := exitStatus(g.proc, 0); err != nil {
		return h2specResult{err: fmt.Errorf("the gateway %v during h2spec:\n%s", err, tail(g.proc.Output(), 4000))}
	}
	return h2specResult{cases: cases}
}

// junit is the part of h2spec's JUnit report the test reads.
type junit struct {
	Suites []struct {
		Package string `xml:"package,attr"`
		Cases   []struct {
			Name    string    `xml:"classname,attr"`
			Error   *string   `xml:"error"`
			Failure *string   `xml:"failure"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// parseJUnit reads h2spec's report. A case's ID is its suite's package and its position in
// the suite, counted from 1, as h2spec numbers them.
func parseJUnit(path string) ([]h2specCase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r junit
	if err := xml.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	var out []h2specCase
	for _, s := range r.Suites {
		for i, c := range s.Cases {
			hc := h2specCase{id: fmt.Sprintf("%s/%d", s.Package, i+1), desc: c.Name, skipped: c.Skipped != nil}
			for _, f := range []*string{c.Error, c.Failure} {
				if f != nil {
					hc.failure = strings.ReplaceAll(strings.TrimSpace(*f), "\n", " / ")
				}
			}
			out = append(out, hc)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no test case", path)
	}
	return out, nil
}

// expectedFailure is one line of h2spec-expected.txt.
type expectedFailure struct {
	transports []string
	reason     string
}

// readExpected reads the list of cases a gRPC server answers differently: one case a line,
// "ID transports reason", transports a comma-separated list; # starts a comment.
func readExpected(t *testing.T, path string) map[string]expectedFailure {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]expectedFailure{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			t.Fatalf("%s:%d: want \"ID transports reason\", got %q", path, n, line)
		}
		trs := strings.Split(fields[1], ",")
		for _, tr := range trs {
			if !slices.Contains(transports, tr) {
				t.Fatalf("%s:%d: transport %q is not one of %v", path, n, tr, transports)
			}
		}
		if _, dup := out[fields[0]]; dup {
			t.Fatalf("%s:%d: %s is listed twice", path, n, fields[0])
		}
		out[fields[0]] = expectedFailure{transports: trs, reason: strings.Join(fields[2:], " ")}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// closedByReset reports whether a failure is h2spec expecting the connection to be closed and
// seeing it reset: a server that closes a connection whose peer has sent more than it read
// makes the kernel send RST, and whether h2spec reads the close or the reset first is a race.
// The connection is closed either way.
func closedByReset(failure string) bool {
	return strings.Contains(failure, "Connection closed") && strings.HasSuffix(failure, "connection reset by peer")
}

// compareH2spec fails the test for every failure that is not expected on transport, and logs
// every expected one that passed.
func compareH2spec(t *testing.T, transport string, cases []h2specCase, expected map[string]expectedFailure) {
	seen := map[string]bool{}
	failed, skipped := 0, 0
	for _, c := range cases {
		seen[c.id] = true
		if closedByReset(c.failure) {
			t.Logf("h2spec %s (%s) on %s: the connection was reset where h2spec waits for it to be closed: a pass", c.id, c.desc, transport)
			c.failure = ""
		}
		e, listed := expected[c.id]
		listed = listed && slices.Contains(e.transports, transport)
		switch {
		case c.skipped:
			skipped++
		case c.failure != "" && listed:
			failed++
		case c.failure != "":
			failed++
			t.Errorf("h2spec %s (%s) failed on %s and is not in h2spec-expected.txt: %s", c.id, c.desc, transport, c.failure)
		case listed:
			t.Logf("h2spec %s (%s) passes on %s: take it off h2spec-expected.txt for %s", c.id, c.desc, transport, transport)
		}
	}
	for id := range expected {
		if !seen[id] {
			t.Errorf("h2spec-expected.txt lists %s, which h2spec v2.2.1 does not have", id)
		}
	}
	t.Logf("h2spec on %s: %d cases, %d failed (every one listed in h2spec-expected.txt, or reported above), %d skipped", transport, len(cases), failed, skipped)
}

// TestH2specReport checks, without h2spec, that the checked-in list parses and that a report
// is read the way h2spec numbers its cases.
func TestH2specReport(t *testing.T) {
	if len(readExpected(t, "h2spec-expected.txt")) == 0 {
		t.Fatal("h2spec-expected.txt lists no case")
	}
	report := filepath.Join(t.TempDir(), "report.xml")
	if err := os.WriteFile(report, []byte(`<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="5.1. Stream States" package="http2/5.1" tests="3">
    <testcase package="http2/5.1" classname="idle: Sends a DATA frame" time="0.0003"></testcase>
    <testcase package="http2/5.1" classname="idle: Sends a RST_STREAM frame" time="2.0"><error>GOAWAY Frame (Error Code: PROTOCOL_ERROR)
Connection closed
Timeout</error></testcase>
    <testcase package="http2/5.1" classname="idle: Sends a WINDOW_UPDATE frame" time="0.0"><skipped></skipped></testcase>
  </testsuite>
</testsuites>`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases, err := parseJUnit(report)
	if err != nil {
		t.Fatal(err)
	}
	want := []h2specCase{
		{id: "http2/5.1/1", desc: "idle: Sends a DATA frame"},
		{id: "http2/5.1/2", desc: "idle: Sends a RST_STREAM frame", failure: "GOAWAY Frame (Error Code: PROTOCOL_ERROR) / Connection closed / Timeout"},
		{id: "http2/5.1/3", desc: "idle: Sends a WINDOW_UPDATE frame", skipped: true},
	}
	if !slices.Equal(cases, want) {
		t.Errorf("parsed %+v\nwant %+v", cases, want)
	}
	for failure, want := range map[string]bool{
		"GOAWAY Frame (Error Code: PROTOCOL_ERROR) / Connection closed / Error: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer": true,
		"GOAWAY Frame (Error Code: PROTOCOL_ERROR) / Connection closed / Timeout":                                                                  false,
		"RST_STREAM Frame (Error Code: PROTOCOL_ERROR) / Error: read: connection reset by peer":                                                    false,
	} {
		if got := closedByReset(failure); got != want {
			t.Errorf("closedByReset(%q) = %v, want %v", failure, got, want)
		}
	}
}
