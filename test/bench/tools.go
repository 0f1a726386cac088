package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// findTools returns the path of each command in names, "" for one not installed. With
// install, as root, with apt-get, it first installs the missing ones from the Debian packages
// of the same names (haproxy, socat);
// a failed installation is reported on progress and leaves them "" (their rows then say
// "not installed").
func findTools(ctx context.Context, names []string, install bool, progress io.Writer) map[string]string {
	paths := map[string]string{}
	var missing []string
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			paths[n] = p
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 || !install {
		return paths
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		fmt.Fprintf(progress, "bench: %s not installed (installing needs root and apt-get)\n", strings.Join(missing, ", "))
		return paths
	}
	fmt.Fprintf(progress, "bench: installing %s from Debian's packages\n", strings.Join(missing, " "))
	for _, argv := range [][]string{{"apt-get", "update", "-qq"}, append([]string{"apt-get", "install", "-y", "-qq"}, missing...)} {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(progress, "bench: %s: %v\n%s\n", strings.Join(argv, " "), err, out)
			return paths
		}
	}
	for _, n := range missing {
		if p, err := exec.LookPath(n); err == nil {
			paths[n] = p
		}
	}
	return paths
}

// toolVersion returns the line of the command's output that gives its version (the first
// line saying "version", else the first line).
func toolVersion(ctx context.Context, argv ...string) string {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return "unknown"
	}
	first := ""
	for line := range strings.SplitSeq(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(strings.ToLower(line), "version") {
			return line
		}
		if first == "" {
			first = line
		}
	}
	return cmp.Or(first, "unknown")
}
