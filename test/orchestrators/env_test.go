package orchestrators

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// env is one run's world: the work directory (short, so socket paths stay under the kernel's
// 108-byte limit), the binaries, and everything started, to be undone at the end.
type env struct {
	t       *testing.T
	work    string // everything this run writes, mounts and listens on (sockets)
	logs    string // one file per process
	repo    string // the csi-gateway repository
	gateway string // the csi-gateway binary under test

	// inside, when set, is the command prefix that runs a command in the test node's network
	// and mount namespaces (nsenter; node_host_test.go): every process start and try run
	// there.
	inside []string

	mu    sync.Mutex
	procs []*proc
	undo  []func() // run first by cleanup, newest first (the node's teardown)
}

// command is name with args, run inside the node's namespaces when e.inside is set.
func (e *env) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if len(e.inside) > 0 {
		args = append(append(slices.Clone(e.inside[1:]), name), args...)
		name = e.inside[0]
	}
	return exec.CommandContext(ctx, name, args...)
}

// newEnv makes the work directory and registers the clean-up that stops every process this
// run started (by PID), undoes its mounts and loop devices, and removes the directory unless
// the test failed (then it says where the logs are).
func newEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the orchestrator e2e needs root: Nomad's exec driver and the appliance's Node calls mount")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work, err := os.MkdirTemp("", "csigw-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, work: work, logs: filepath.Join(work, "logs"), repo: repo}
	if err := os.MkdirAll(e.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	// The owner file lets a later run undo this one if it dies without cleaning up (killed,
	// or go test's -timeout, which skips clean-ups).
	if err := os.WriteFile(filepath.Join(work, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	reapAbandoned(t, filepath.Dir(work))
	// SIGINT and SIGTERM undo the run too. The handler stays until the clean-up is over
	// (clean-ups run last registered first).
	var once sync.Once
	cleanup := func() { once.Do(e.cleanup) }
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	t.Cleanup(func() { signal.Stop(sigs); close(sigs) })
	t.Cleanup(cleanup)
	go func() {
		if sig, ok := <-sigs; ok {
			t.Errorf("%v: stopping what this run started in %s", sig, work) // keeps the logs
			cleanup()
			os.Exit(1)
		}
	}()
	e.gateway = os.Getenv("CSIGWTEST_E2E_GATEWAY")
	if e.gateway == "" {
		e.gateway = filepath.Join(work, "bin", "csi-gateway")
		cmd := exec.Command("nice", "-n", "19", "go", "build", "-trimpath", "-o", e.gateway, "./cmd/csi-gateway")
		cmd.Dir, cmd.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/csi-gateway: %v\n%s", err, out)
		}
	}
	t.Logf("work directory %s", work)
	return e
}

// component is the path of a pinned orchestrator binary built by build-components.sh.
func (e *env) component(name string) string {
	e.t.Helper()
	out, err := exec.Command("./build-components.sh", "--path", name).Output()
	if err != nil {
		e.t.Fatalf("build-components.sh --path %s: %v", name, err)
	}
	p := strings.TrimSpace(string(out))
	if _, err := os.Stat(p); err != nil {
		e.t.Fatalf("%s is not built (%v): run make e2e, or test/orchestrators/build-components.sh %s", name, err, name)
	}
	return p
}

// run runs a command to completion and fails the test if it fails; it returns stdout.
func (e *env) run(dir string, stdin []byte, name string, args ...string) string {
	e.t.Helper()
	out, err := e.try(dir, stdin, name, args...)
	if err != nil {
		e.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// try runs a command to completion (at most 2 minutes) and returns its stdout, or its
// combined output with the error.
func (e *env) try(dir string, stdin []byte, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e.command(ctx, name, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// proc is a process this run started; its output goes to logs/NAME.log.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start starts a long-running process in its own process group.
func (e *env) start(name string, envv []string, bin string, args ...string) *proc {
	e.t.Helper()
	logPath := filepath.Join(e.logs, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := e.command(context.Background(), bin, args...)
	cmd.Dir = e.work
	cmd.Env = append(os.Environ(), envv...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		e.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// stop sends SIGTERM to the process (and its group), waits up to grace, then kills it.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// tail is the last n lines of the process's log, for failure messages.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// eventually polls cond every 250 ms until it holds or timeout passes; cond's string says
// what it saw last, for the failure message.
func (e *env) eventually(timeout time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, seen := cond()
		if ok {
			return
		}
		last = seen
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// freePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func (e *env) freePort() int {
	e.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (e *env) write(rel, content string) string {
	e.t.Helper()
	p := filepath.Join(e.work, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// cleanup undoes the run: processes (newest first, each by its PID and group), then any
// process still running from the work directory (Nomad's executors and tasks leave their
// parent's group), then mounts under the work directory (deepest first) and loop devices
// backed by files in it.
func (e *env) cleanup() {
	e.mu.Lock()
	procs, undo := slices.Clone(e.procs), slices.Clone(e.undo)
	e.mu.Unlock()
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(15 * time.Second)
	}
	for _, pid := range pidsUnder(e.work) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 50 && len(pidsUnder(e.work)) > 0; i++ {
		time.Sleep(100 * time.Millisecond) // gone before their mounts are undone
	}
	for _, m := range mountsUnder(e.work) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			e.t.Logf("cleanup: umount %s: %v", m, err)
		}
	}
	if out, err := exec.Command("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && strings.HasPrefix(f[1], e.work+"/") {
				exec.Command("losetup", "-d", f[0]).Run()
			}
		}
	}
	if e.t.Failed() || os.Getenv("CSIGWTEST_E2E_KEEP") != "" {
		e.t.Logf("logs kept in %s", e.logs)
		return
	}
	if err := os.RemoveAll(e.work); err != nil {
		e.t.Logf("cleanup: %v", err)
	}
}

// reapAbandoned undoes the runs in dir (csigw-e2e-*) whose test process is gone: their
// processes (by PID), mounts and loop devices, and their directories.
func reapAbandoned(t *testing.T, dir string) {
	runs, _ := filepath.Glob(filepath.Join(dir, "csigw-e2e-*"))
	for _, run := range runs {
		b, err := os.ReadFile(filepath.Join(run, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue // not ours to judge, or still running
		}
		t.Logf("undoing an abandoned run in %s", run)
		old := &env{t: t, work: run}
		old.cleanup()
		if err := os.RemoveAll(run); err != nil {
			t.Logf("remove %s: %v", run, err)
		}
	}
}

// pidsUnder lists the processes this run started, directly or through Nomad, and never
// anything else on the machine: those whose command line names a path under dir, and the
// tasks of the Nomad allocations under dir (an exec task lives in its own mount namespace
// and names nothing of ours; its environment carries its allocation's ID).
func pidsUnder(dir string) []int {
	allocs := map[string]bool{}
	if ds, err := filepath.Glob(filepath.Join(dir, "nomad", "alloc", "*")); err == nil {
		for _, d := range ds {
			allocs["NOMAD_ALLOC_ID="+filepath.Base(d)] = true
		}
	}
	ents, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(dir+"/")) {
			pids = append(pids, pid)
			continue
		}
		if len(allocs) > 0 {
			environ, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
			for _, kv := range bytes.Split(environ, []byte{0}) {
				if allocs[string(kv)] {
					pids = append(pids, pid)
					break
				}
			}
		}
	}
	return pids
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, dir+"/") {
			ms = append(ms, mp)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return len(ms[i]) > len(ms[j]) })
	return slices.Compact(ms)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// scanLogs returns, for each file under the roots that contains any of needles, which ones.
func scanLogs(needles []string, roots ...string) (map[string][]string, int, error) {
	found := map[string][]string{}
	files := 0
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
					return nil
				}
				return err
			}
			if d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			files++
			for _, n := range needles {
				if bytes.Contains(b, []byte(n)) {
					found[p] = append(found[p], n)
				}
			}
			return nil
		})
		if err != nil {
			return nil, files, fmt.Errorf("scan %s: %w", root, err)
		}
	}
	return found, files, nil
}
