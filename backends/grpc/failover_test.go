package grpcbackend

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// restartableDriver is a testDriver on a fixed Unix socket that the test stops and starts
// again; what reached it is counted across restarts (d.codec).
type restartableDriver struct {
	t      *testing.T
	d      *testDriver
	path   string
	target string

	mu  sync.Mutex
	srv *grpc.Server
}

// newRestartableDriver returns a driver that is not running yet.
func newRestartableDriver(t *testing.T, name string) *restartableDriver {
	t.Helper()
	path := socketPath(t, name)
	r := &restartableDriver{t: t, d: &testDriver{codec: &recordingCodec{}}, path: path, target: "unix://" + path}
	r.d.target = r.target
	t.Cleanup(r.stop)
	return r
}

func (r *restartableDriver) start() {
	r.t.Helper()
	srv := grpc.NewServer(grpc.ForceServerCodecV2(r.d.codec))
	csi.RegisterIdentityServer(srv, r.d)
	csi.RegisterControllerServer(srv, r.d)
	csi.RegisterSnapshotMetadataServer(srv, r.d)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("unix", r.path)
	if err != nil {
		r.t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

// stop stops the driver (its socket goes away) and cuts its connections.
func (r *restartableDriver) stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
}

// calls is how many request messages reached the driver so far.
func (r *restartableDriver) calls() int { return len(r.d.codec.received()) }

// waitGone waits until the backend's connection to target i has seen its driver go, so that
// the next call cannot be sent on the dying connection (which would count as reaching the
// driver, and rightly not fail over): grpc-go's connection says IDLE or TRANSIENT_FAILURE, the
// frame client's driver no longer answers Probe.
//
// Not merely "not READY": grpc-go gives calls a connection's picker before it publishes the
// connection's state, so a connection calls have been using can still say CONNECTING when its
// driver stops (under -race on a busy machine it did: the next call went out on the old
// connection and got EOF). The states a connection publishes keep their order, so a
// connection that was serving calls says IDLE only once it has lost them.
func waitGone(t *testing.T, b *Backend, i int) {
	t.Helper()
	tg := b.targets[i]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if tg.conn == nil {
		for probeAnswered(ctx, tg) {
		}
		if ctx.Err() != nil {
			t.Fatalf("the driver at %s still answers", tg.addr)
		}
		return
	}
	for s := tg.conn.GetState(); s != connectivity.Idle && s != connectivity.TransientFailure; s = tg.conn.GetState() {
		if !tg.conn.WaitForStateChange(ctx, s) {
			t.Fatalf("the connection to %s still says %v", tg.addr, s)
		}
	}
}

// probeAnswered reports whether the driver at tg answers Probe, asked over the frame client
// (which keeps no connection state to ask instead).
func probeAnswered(ctx context.Context, tg *target) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := csi.NewIdentityClient(tg.calls).Probe(ctx, &csi.ProbeRequest{})
	return err == nil
}

// newFailoverBackend returns a Backend called "drv" over targets, logging to a buffer.
func newFailoverBackend(t *testing.T, targets ...string) (*Backend, *testutil.SyncBuffer) {
	t.Helper()
	var log testutil.SyncBuffer
	b, err := New("drv", Config{Targets: targets}, WithFrames(framesUnderTest), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, &log
}

// createOn calls CreateVolume and returns how many attempts it took and its error.
func createOn(t *testing.T, b *Backend, name string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, ci := backends.WithCallInfo(ctx)
	_, err := b.Unary(ctx, createVolume, mustMarshal(t, &csi.CreateVolumeRequest{Name: name}))
	return ci.Attempts(), err
}

// TestFailoverUnary walks through an outage of each driver in turn: the first down, calls go to
// the second; the first back, calls stay on the second; the second down, calls go to the first;
// both down, the error names both.
func TestFailoverUnary(t *testing.T) {
	first, second := newRestartableDriver(t, "first.sock"), newRestartableDriver(t, "second.sock")
	second.start()
	b, log := newFailoverBackend(t, first.target, second.target)

	type step struct {
		name          string
		attempts      int
		first, second int // calls each driver has seen after the step
	}
	check := func(s step) {
		t.Helper()
		attempts, err := createOn(t, b, "pvc-"+strings.ReplaceAll(s.name, " ", "-"))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if attempts != s.attempts || first.calls() != s.first || second.calls() != s.second {
			t.Fatalf("%s: %d attempts, calls first %d second %d; want %d, %d, %d",
				s.name, attempts, first.calls(), second.calls(), s.attempts, s.first, s.second)
		}
	}

	check(step{"first down", 2, 0, 1})
	if l := log.String(); !strings.Contains(l, "calls now go to another target") ||
		!strings.Contains(l, "from="+first.target) || !strings.Contains(l, "to="+second.target) {
		t.Errorf("log lacks the move to the second target:\n%s", l)
	}
	check(step{"sticky while first down", 1, 0, 2})

	first.start()
	check(step{"sticky after first is back", 1, 0, 3})
	check(step{"still sticky", 1, 0, 4})

	second.stop()
	waitGone(t, b, 1)
	check(step{"second down", 2, 1, 4})
	check(step{"sticky on first", 1, 2, 4})

	first.stop()
	waitGone(t, b, 0)
	attempts, err := createOn(t, b, "pvc-both-down")
	be := asBackendError(t, err)
	wantPrefix := `backend "drv": cannot reach the driver at any target: ` + first.target + " ("
	wantSuffix := "); is the driver running? check backends.drv.targets"
	if be.Class != backends.ClassUnavailable || attempts != 2 ||
		!strings.HasPrefix(be.Message, wantPrefix) || !strings.HasSuffix(be.Message, wantSuffix) ||
		!strings.Contains(be.Message, "); "+second.target+" (") {
		t.Errorf("both down: %d attempts, %v %q\nwant 2 attempts, unavailable %q…%s…%q", attempts, be.Class, be.Message, wantPrefix, second.target, wantSuffix)
	}
}

// TestFailoverNotOnAnswers: a driver that answers, whatever it answers (its own UNAVAILABLE
// too), keeps the call: failover never repeats a request a driver has seen.
func TestFailoverNotOnAnswers(t *testing.T) {
	first, second := newRestartableDriver(t, "first.sock"), newRestartableDriver(t, "second.sock")
	first.start()
	second.start()
	b, _ := newFailoverBackend(t, first.target, second.target)

	attempts, err := createOn(t, b, "code-14") // the driver answers UNAVAILABLE
	be := asBackendError(t, err)
	if be.Class != backends.ClassUnavailable || be.Message != `backend "drv": driver says Unavailable` || attempts != 1 {
		t.Errorf("got %v %q after %d attempts, want the first driver's answer after 1", be.Class, be.Message, attempts)
	}
	if first.calls() != 1 || second.calls() != 0 {
		t.Errorf("calls first %d second %d, want 1, 0", first.calls(), second.calls())
	}
}

// TestFailoverSingleTargetMessage: with one target in targets, a driver that is down is
// reported as with target, naming the key.
func TestFailoverSingleTargetMessage(t *testing.T) {
	only := newRestartableDriver(t, "only.sock")
	b, _ := newFailoverBackend(t, only.target)
	_, err := createOn(t, b, "pvc")
	be := asBackendError(t, err)
	if !strings.HasPrefix(be.Message, `backend "drv": cannot reach the driver at `+only.target+" (") ||
		!strings.HasSuffix(be.Message, "; is the driver running? check backends.drv.targets[0]") {
		t.Errorf("got %q", be.Message)
	}
}

// TestFailoverStream: a stream that cannot be opened on the first target is opened on the
// second; a stream cut after frames went through is not moved to another target.
func TestFailoverStream(t *testing.T) {
	first, second := newRestartableDriver(t, "first.sock"), newRestartableDriver(t, "second.sock")
	second.start()
	b, _ := newFailoverBackend(t, first.target, second.target)
	f := startFront(t, b, false)
	client := csi.NewSnapshotMetadataClient(f.conn)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1"})
	if err != nil {
		t.Fatal(err)
	}
	frames := 0
	for {
		_, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv after %d frames: %v", frames, err)
		}
		frames++
	}
	if frames != 3 || first.calls() != 0 || second.calls() != 1 {
		t.Fatalf("%d frames, calls first %d second %d; want 3, 0, 1", frames, first.calls(), second.calls())
	}

	// The second driver sends one frame, then goes away; the first is up by then.
	first.start()
	s, err = client.GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{SnapshotId: "block"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("first frame: %v", err)
	}
	second.stop()
	if _, err := s.Recv(); err == nil {
		t.Fatal("the stream went on after its driver stopped")
	}
	be := asBackendError(t, f.err())
	if be.Class != backends.ClassUnavailable || first.calls() != 0 {
		t.Errorf("cut stream: %v %q, first driver calls %d; want unavailable and no call moved", be.Class, be.Message, first.calls())
	}
}

// TestFailoverReady: Ready is nil when any target is ready and moves calls there; when none
// is, it says why for each.
func TestFailoverReady(t *testing.T) {
	first, second := newRestartableDriver(t, "first.sock"), newRestartableDriver(t, "second.sock")
	b, _ := newFailoverBackend(t, first.target, second.target)

	be := asBackendError(t, b.Ready(context.Background()))
	wantPrefix := `backend "drv": no target is ready: ` + first.target + `: Identity/Probe: cannot reach the driver at ` + first.target + " ("
	if be.Class != backends.ClassUnavailable || !strings.HasPrefix(be.Message, wantPrefix) ||
		!strings.Contains(be.Message, "; "+second.target+": Identity/Probe: cannot reach the driver at "+second.target+" (") {
		t.Errorf("both down: %v %q", be.Class, be.Message)
	}

	second.start()
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("second up: %v", err)
	}
	if b.preferred.Load() != 1 {
		t.Errorf("calls go to target %d after Ready, want 1", b.preferred.Load())
	}
	before := second.calls() // Ready's probe
	if attempts, err := createOn(t, b, "pvc"); err != nil || attempts != 1 || second.calls() != before+1 {
		t.Errorf("call after Ready: %d attempts, %v, second driver calls %d; want 1, nil, %d", attempts, err, second.calls(), before+1)
	}

	// Up but still starting: not ready either.
	second.d.notReady.Store(true)
	be = asBackendError(t, b.Ready(context.Background()))
	want := "; " + first.target + ": Identity/Probe: cannot reach the driver at " + first.target
	if !strings.HasPrefix(be.Message, `backend "drv": no target is ready: `+second.target+": Identity/Probe: the driver at "+second.target+" reports ready=false") ||
		!strings.Contains(be.Message, want) {
		t.Errorf("second starting, first down: %q", be.Message)
	}
}

func TestNewTargetsList(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"both", Config{Target: "unix:///a.sock", Targets: []string{"unix:///b.sock"}},
			`backends.drv: target and targets are both set; use target for one driver address or targets for several, not both`},
		{"bad second", Config{Targets: []string{"unix:///a.sock", "unix://b.sock"}},
			`backends.drv.targets[1]: "unix://b.sock": the socket path must be absolute: write unix:///abs/path.sock`},
		{"empty entry", Config{Targets: []string{"unix:///a.sock", ""}},
			`backends.drv.targets[1]: required (unix:///abs/path.sock or dns:///host:port)`},
		{"tcp without tls", Config{Targets: []string{"unix:///a.sock", "dns:///b.example:9443"}},
			`backends.drv.targets[1]: "dns:///b.example:9443": TLS is required for TCP targets; configure TLS for this backend (backends.drv.tls)`},
		{"neither", Config{}, `backends.drv.target: required (unix:///abs/path.sock or dns:///host:port)`},
		{"two", Config{Targets: []string{"unix:///a.sock", "unix:///b.sock"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New("drv", tt.cfg)
			if tt.wantErr != "" {
				if err == nil {
					b.Close()
					t.Fatal("New accepted it")
				}
				if err.Error() != tt.wantErr {
					t.Errorf("error %q\nwant      %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := strings.Join(b.Targets(), " "); got != strings.Join(tt.cfg.Targets, " ") || b.Target() != tt.cfg.Targets[0] {
				t.Errorf("Targets %q, Target %q", got, b.Target())
			}
		})
	}
}
