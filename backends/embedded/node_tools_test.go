package embedded

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
)

// fakeTool makes n run, for any program, a shell script that prints stderr and exits with
// code.
func fakeTool(t *testing.T, n *nodeService, name, stderr string, code int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	script := "#!/bin/sh\necho '" + stderr + "' >&2\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	n.lookPath = func(string) (string, error) { return path, nil }
}

func TestRunReportsFailures(t *testing.T) {
	n := openTest(t, Config{}).node
	tests := []struct {
		name   string
		stderr string
		code   int
		status codes.Code
		want   string
	}{
		{"refused", "losetup: /dev/loop-control: Permission denied", 1, codes.FailedPrecondition, "needs root (CAP_SYS_ADMIN)"},
		{"not permitted", "mount: Operation not permitted", 32, codes.FailedPrecondition, "needs root"},
		{"plain failure", "losetup: no such file", 1, codes.Internal, "losetup --list: exit status 1: losetup: no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeTool(t, n, "losetup", tc.stderr, tc.code)
			_, err := n.run(bgCtx, "losetup", "--list")
			var tool *toolError
			if !errors.As(err, &tool) || tool.exitCode() != tc.code {
				t.Fatalf("got %v, want a toolError with exit code %d", err, tc.code)
			}
			wantCode(t, nodeStatus(err), tc.status, tc.want)
		})
	}
}

func TestBlkidNothingFound(t *testing.T) {
	n := openTest(t, Config{}).node
	fakeTool(t, n, "blkid", "", 2) // blkid's "nothing recognized"
	if fs, pt, err := n.probeFS(bgCtx, "/dev/null"); err != nil || fs != "" || pt != "" {
		t.Fatalf("got %q %q %v, want nothing and no error", fs, pt, err)
	}
}

func TestMissingToolNamesPackage(t *testing.T) {
	n := openTest(t, Config{}).node
	n.lookPath = func(name string) (string, error) { return "", errors.New("not found") }
	for tool, pkg := range toolPackages {
		_, err := n.run(bgCtx, tool)
		wantCode(t, nodeStatus(err), codes.FailedPrecondition, tool+" is not installed", "install "+pkg)
	}
}
