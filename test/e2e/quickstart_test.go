package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// quickStartNodeStep matches the lines of the quick start that need root and loop devices:
// the node calls and the write into the mounted volume.
var quickStartNodeStep = regexp.MustCompile(`call (stage|node-publish|node-unpublish|unstage) |^\s*--publish-context-file|^echo hello`)

// readmeQuickStart returns the README's quick start: the sh block that exports CSI_ENDPOINT,
// the one a reader pastes with `make run` going.
func readmeQuickStart(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```sh\nexport CSI_ENDPOINT=")
	if !ok {
		t.Fatal("README.md has no ```sh block starting with export CSI_ENDPOINT= (the quick start)")
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatal("README.md: the quick start's ```sh block does not end")
	}
	return "export CSI_ENDPOINT=" + block + "\n"
}

// withoutNodeSteps drops the node steps (and the continuation lines of node-publish).
func withoutNodeSteps(script string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(script))
	for sc.Scan() {
		if !quickStartNodeStep.MatchString(sc.Text()) {
			out = append(out, sc.Text())
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// canRunNodeSteps says why the node steps cannot run here, or "" when they can.
func canRunNodeSteps() string {
	if os.Geteuid() != 0 {
		return "they mount: run the tests as root"
	}
	for _, tool := range []string{"mkfs.ext4", "losetup", "blkid"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is missing (make test-deps installs e2fsprogs and util-linux)"
		}
	}
	return ""
}

// TestReadmeQuickStartTwice runs the README's quick start, as written, twice in a row against
// the real binary serving the embedded appliance the way `make run` does, with the same data
// directory and a fresh gateway each time: the second run must work as the first did (it
// once picked another volume's ID, and could not carry the publish context to stage). The
// script runs in a directory laid out like the repository (bin/csi-gateway, .run/), with
// /tmp/demo moved into the test's temporary directory. The node steps run as root with the
// mount tools; otherwise the controller steps run and the test says loudly what it skipped.
func TestReadmeQuickStartTwice(t *testing.T) {
	script := readmeQuickStart(t)
	skipNode := canRunNodeSteps()
	if skipNode != "" {
		script = withoutNodeSteps(script)
	}
	dir := t.TempDir()
	demo := filepath.Join(dir, "demo")
	script = strings.ReplaceAll(script, "/tmp/demo", demo)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testutil.Binary(t), filepath.Join(dir, "bin", "csi-gateway")); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, ".run")
	t.Cleanup(func() { unmountQuickStart(t, demo, filepath.Join(runDir, "data")) })

	var ids []string
	for run := 1; run <= 2; run++ {
		sock := filepath.Join(runDir, "csi.sock")
		gw := testutil.Start(t, "serve", "--endpoint", "unix://"+sock, "--data-dir", filepath.Join(runDir, "data"), "--log-format", "text")
		testutil.Dial(t, "unix://"+sock)

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-eux", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PWD="+dir)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("quick start, run %d: %v\n%s\ngateway:\n%s", run, err, out, gw.Output())
		}
		id := regexp.MustCompile(`(?m)^\+ ID=(\S+)$`).FindStringSubmatch(string(out))
		if id == nil {
			t.Fatalf("quick start, run %d: sh -x shows no ID= assignment:\n%s", run, out)
		}
		ids = append(ids, id[1])
		if ctxFile, err := os.Stat(filepath.Join(demo, "ctx.json")); err != nil || ctxFile.Mode().Perm() != 0o600 {
			t.Errorf("run %d: the saved publish context: %v, %v; want a file of mode 0600", run, ctxFile, err)
		}
		if err := gw.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := gw.Wait(30 * time.Second); err != nil {
			t.Fatalf("run %d: the gateway did not stop cleanly on SIGTERM: %v\n%s", run, err, gw.Output())
		}
	}
	t.Logf("volume IDs of the two runs: %v", ids)
	if skipNode != "" {
		t.Skipf("SKIPPED the quick start's node steps (stage, node-publish, the write, node-unpublish, unstage): %s; its controller steps ran twice and passed", skipNode)
	}
}

// unmountQuickStart undoes what a failed run may have left: the target and staging mounts and
// the loop devices of the volumes' images.
func unmountQuickStart(t *testing.T, demo, data string) {
	for _, m := range []string{filepath.Join(demo, "target", "v"), filepath.Join(demo, "staging")} {
		if err := syscall.Unmount(m, 0); err == nil {
			t.Logf("cleanup: unmounted %s, left mounted by a failed run", m)
		}
	}
	images, _ := filepath.Glob(filepath.Join(data, "volumes", "*"))
	for _, img := range images {
		out, err := exec.Command("losetup", "-j", img).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if dev, _, ok := strings.Cut(line, ":"); ok {
				exec.Command("losetup", "-d", dev).Run()
				t.Logf("cleanup: detached %s (%s), left attached by a failed run", dev, img)
			}
		}
	}
}

// TestQuickStartWithoutNodeSteps: what runs when the node steps cannot keeps every controller
// step and drops every node step, continuation lines included.
func TestQuickStartWithoutNodeSteps(t *testing.T) {
	script := withoutNodeSteps(readmeQuickStart(t))
	for _, gone := range []string{"call stage", "call node-publish", "call node-unpublish", "call unstage", "--publish-context-file", "echo hello"} {
		if strings.Contains(script, gone) {
			t.Errorf("the controller-only quick start still has %q:\n%s", gone, script)
		}
	}
	for _, kept := range []string{"call create-volume", "call publish", "call unpublish", "call delete-volume"} {
		if !strings.Contains(script, kept) {
			t.Errorf("the controller-only quick start lost %q:\n%s", kept, script)
		}
	}
}
