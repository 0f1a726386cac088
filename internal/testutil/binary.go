package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/csi-gateway once per test process and returns the path of the binary.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		dir, err := os.MkdirTemp("", "csigw-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "csi-gateway")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/csi-gateway")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Process is the real binary running as a child process, its output kept in memory.
type Process struct {
	cmd  *exec.Cmd
	out  *SyncBuffer
	done chan struct{}
	err  error // the exit status, once done is closed
}

// Start runs the binary with args and stops it (SIGKILL) when the test ends, if still running.
func Start(t testing.TB, args ...string) *Process {
	t.Helper()
	return StartCommand(t, Binary(t), args...)
}

// StartCommand is Start for another program: a binary the test built itself, or a shell that
// prepares the process (its cgroup, say) before it execs the binary.
func StartCommand(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	return start(t, exec.Command(name, args...))
}

// StartEnv is Start with env (KEY=value entries) as the whole environment, in place of the
// test's.
func StartEnv(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = env
	return start(t, cmd)
}

func start(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{cmd: cmd, out: &SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	return p
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// PID is the process's id (for reading /proc/PID).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit and returns its exit error (nil for 0).
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("still running after %v", timeout)
	}
}

// Output returns everything the process wrote so far.
func (p *Process) Output() string { return p.out.String() }

// Dial connects to a CSI endpoint such as unix:///tmp/x.sock and waits until Probe answers,
// failing the test after 20 s. The connection is closed when the test ends.
func Dial(t testing.TB, endpoint string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
		cancel()
		if err == nil {
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer Probe within 20s: %v", endpoint, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
