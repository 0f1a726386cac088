package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestHarnessVariablesListed: every CSIGW_* variable the project's build and test harness
// sets or reads (the Makefile, .ci/run, the e2e scripts, internal/testutil, test/leftovers)
// is in harnessVariables, so a gateway a test starts, which inherits the test's environment,
// does not refuse it as an unknown configuration variable. A new harness variable fails here,
// not in some test that happens to start the binary.
func TestHarnessVariablesListed(t *testing.T) {
	var files []string
	for _, glob := range []string{"Makefile", ".ci/run", "test/orchestrators/*.sh", "internal/testutil/*.go", "test/leftovers/*.go"} {
		m, err := filepath.Glob(filepath.Join("..", "..", glob))
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: no file (%v)", glob, err)
		}
		files = append(files, m...)
	}
	name := regexp.MustCompile(`CSIGW_[A-Z0-9_]*[A-Z0-9]`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range name.FindAllString(string(b), -1) {
			if !slices.Contains(harnessVariables, v) && v != socketModeVar {
				t.Errorf("%s uses %s, which harnessVariables (config_env.go) does not list", f, v)
			}
		}
	}
}
