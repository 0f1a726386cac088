package testutil

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// sanityVariantEnv tells a re-executed test binary which variant of a sanity run it is.
const sanityVariantEnv = "CSIGWTEST_SANITY_VARIANT"

// SanityVariants runs body once per variant, each in a child process of the test binary.
//
// csi-sanity runs on Ginkgo, which allows one suite run per process; running each variant in
// its own process lets one test binary run the suite against several configurations (mount
// and block volumes, several backends) and report each separately. In the child, body runs
// directly and is expected to call sanity.Test once. The parent fails the sub-test when the
// child fails and logs the suite's summary line ("Ran N of M Specs ... Passed | Failed ..."),
// which it also returns by variant (nil in the child) for a test that compares the runs.
func SanityVariants(t *testing.T, variants []string, body func(t *testing.T, variant string)) map[string]string {
	if v := os.Getenv(sanityVariantEnv); v != "" {
		body(t, v)
		return nil
	}
	summaries := map[string]string{}
	for _, v := range variants {
		t.Run(v, func(t *testing.T) { summaries[v] = runSanityChild(t, v) })
	}
	return summaries
}

// SanityConcurrently is SanityVariants with the variants' suites running at the same time,
// against what setup starts once, in the parent process only (setup may pass what the
// children need through t.Setenv). It reports each variant as a sub-test.
func SanityConcurrently(t *testing.T, variants []string, setup func(t *testing.T), body func(t *testing.T, variant string)) {
	if v := os.Getenv(sanityVariantEnv); v != "" {
		body(t, v)
		return
	}
	setup(t)
	t.Run("concurrently", func(t *testing.T) {
		for _, v := range variants {
			t.Run(v, func(t *testing.T) {
				t.Parallel()
				runSanityChild(t, v)
			})
		}
	})
}

// runSanityChild runs the parent test again in a child process, as variant v, and reports
// its suite's outcome in t; it returns the suite's summary.
func runSanityChild(t *testing.T, v string) string {
	top := t.Name()[:strings.Index(t.Name(), "/")]
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(top)+"$", "-test.v", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), sanityVariantEnv+"="+v)
	out, err := cmd.CombinedOutput()
	summary := SanitySummary(out)
	t.Logf("csi-sanity %s: %s", v, summary)
	if err != nil {
		t.Errorf("csi-sanity %s failed: %v\n%s", v, err, tail(out, 200))
	}
	if os.Getenv("CSIGWTEST_SANITY_LOG") != "" {
		os.WriteFile(os.Getenv("CSIGWTEST_SANITY_LOG")+"."+strings.ReplaceAll(t.Name(), "/", "_")+".log", out, 0o644)
	}
	return summary
}

// SanitySummary extracts Ginkgo's result lines from a suite's output.
func SanitySummary(out []byte) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(ansiEscape.ReplaceAllString(sc.Text(), ""))
		if strings.HasPrefix(l, "Ran ") || strings.Contains(l, "Passed |") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "no summary (the suite did not run)"
	}
	return strings.Join(lines, " ")
}

// ansiEscape matches the colour codes Ginkgo writes.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(string(out), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
