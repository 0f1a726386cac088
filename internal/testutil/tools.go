package testutil

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Tool returns the client tool (grpcurl, grpc_health_probe) the environment variable env
// names, as `make test` sets it after building the tool into .tools/bin, or skips the test
// loudly.
func Tool(t testing.TB, env, name string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		t.Skipf("SKIPPED: %s is not set. `make test` builds %s (pinned in tools/probes/go.mod) into .tools/bin and sets it", env, name)
	}
	return bin
}

// RunTool runs a client tool for at most a minute and returns its combined output and exit
// status; failing to run it at all fails the test.
func RunTool(t testing.TB, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", bin, err)
	}
	if exit != nil {
		return string(out), exit.ExitCode()
	}
	return string(out), 0
}
