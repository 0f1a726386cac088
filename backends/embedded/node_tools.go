package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// toolPackages names, for every program the node service runs, the package that ships it.
var toolPackages = map[string]string{
	"losetup":   "util-linux",
	"blkid":     "util-linux",
	"mkfs.ext4": "e2fsprogs",
	"e2fsck":    "e2fsprogs",
	"resize2fs": "e2fsprogs",
}

// toolTimeout bounds one run of a tool. The caller's cancellation does not stop a tool: a
// mkfs or resize2fs killed halfway leaves a worse volume than one that finished late.
const toolTimeout = 5 * time.Minute

// missingToolError says which program is missing and which package to install.
type missingToolError struct {
	tool string
}

func (e *missingToolError) Error() string {
	return fmt.Sprintf("node: %s is not installed (looked in PATH and the sbin folders); install %s on this host", e.tool, toolPackages[e.tool])
}

// tool finds the program name, or fails with a *missingToolError.
func (n *nodeService) tool(name string) (string, error) {
	p, err := n.lookPath(name)
	if err != nil {
		return "", &missingToolError{tool: name}
	}
	return p, nil
}

// toolError is a program that failed: its command line, what it said, and how it ended
// (an *exec.ExitError, or why it did not start).
type toolError struct {
	line   string
	output string
	err    error
}

func (e *toolError) Error() string { return fmt.Sprintf("%s: %v: %s", e.line, e.err, e.output) }
func (e *toolError) Unwrap() error { return e.err }

// denied reports whether the program said it was not permitted.
func (e *toolError) denied() bool {
	lower := strings.ToLower(e.output)
	return strings.Contains(lower, "permission denied") || strings.Contains(lower, "operation not permitted")
}

// exitCode is the program's exit status, or -1 when it did not run to an exit.
func (e *toolError) exitCode() int {
	var exit *exec.ExitError
	if errors.As(e.err, &exit) {
		return exit.ExitCode()
	}
	return -1
}

// run runs the program name with args and returns its standard output. A failure is a
// *toolError.
func (n *nodeService) run(ctx context.Context, name string, args ...string) (string, error) {
	path, err := n.tool(name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), toolTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return "", &toolError{line: name + " " + strings.Join(args, " "), output: msg, err: err}
	}
	return stdout.String(), nil
}
