package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// process is a child the bench started: the driver or a relay. Its stderr goes to a file in
// the bench's directory; it is killed if the bench dies (Pdeathsig).
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // the exit status, once done is closed
	started time.Time
}

// startProcess runs argv with env added to a cleaned environment; its output goes to a log
// file in dir.
func startProcess(dir, name string, env []string, argv ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(childEnviron(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{}), started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// childEnviron is the bench's environment without the variables that would change how the
// gateway is configured (CSIGW_*, CSI_ENDPOINT, OTEL_*): each relay's file says it all.
func childEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CSIGW_") || strings.HasPrefix(kv, "CSI_ENDPOINT=") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM, waits up to five seconds, then kills.
func (p *process) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail returns the end of what the process wrote to its log, for an error message.
func (p *process) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	const keep = 1500
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return strings.TrimSpace(string(b))
}

// awaitProbe polls socket with a fresh connection until Probe answers, and returns how long
// after p started that was. It fails after timeout, or at once if p exits.
func awaitProbe(ctx context.Context, p *process, socket string, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	for {
		if err := probeOnce(ctx, socket); err == nil {
			return time.Since(p.started), nil
		} else if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s does not answer Probe on %s after %v: %v\n%s", p.name, socket, timeout, err, p.logTail())
		}
		select {
		case <-p.done:
			return 0, fmt.Errorf("%s exited (%v) before it answered Probe:\n%s", p.name, p.err, p.logTail())
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func probeOnce(ctx context.Context, socket string) error {
	conn, err := dial(socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	return err
}

// dial returns a client of the gRPC server on the Unix socket.
func dial(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
