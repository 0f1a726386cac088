package grpcbackend

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// breakerBackend returns a Backend called "drv" for target whose breaker opens after failures
// and reads clock.
func breakerBackend(t *testing.T, target string, failures int, clock *testutil.Clock) *Backend {
	t.Helper()
	return newBackend(t, target, WithCircuitBreaker(backends.BreakerConfig{Failures: failures, CoolDown: 5 * time.Second, MaxCoolDown: time.Minute}),
		func(o *options) { o.breaker.now = clock.Now })
}

// driverAt serves a testDriver on the Unix socket at path until stop is called (or the test
// ends); its codec counts the requests that reached it.
type driverAt struct {
	d    *testDriver
	srv  *grpc.Server
	once sync.Once
}

func startDriverAt(t *testing.T, path string) *driverAt {
	t.Helper()
	d := &testDriver{codec: &recordingCodec{}}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(d.codec))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterSnapshotMetadataServer(srv, d)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	r := &driverAt{d: d, srv: srv}
	t.Cleanup(r.stop)
	return r
}

func (r *driverAt) stop()         { r.once.Do(r.srv.Stop) }
func (r *driverAt) requests() int { return len(r.d.codec.received()) }

// create sends a CreateVolume named name; it returns the attempts made and the error.
func create(t *testing.T, b *Backend, name string) (int, error) {
	t.Helper()
	ctx, ci := backends.WithCallInfo(t.Context())
	_, err := b.Unary(ctx, createVolume, mustMarshal(t, &csi.CreateVolumeRequest{Name: name}))
	return ci.Attempts(), err
}

// TestBreakerDriverGoneAndBack: a driver socket that is gone opens the circuit after the
// failures; calls then fail fast without an attempt; once the driver is back and the
// cool-down has passed, the trial call reaches it and calls flow again.
func TestBreakerDriverGoneAndBack(t *testing.T) {
	path := socketPath(t, "drv.sock")
	clock := testutil.NewClock()
	b := breakerBackend(t, "unix://"+path, 3, clock)

	for i := range 3 {
		attempts, err := create(t, b, "a")
		be := asBackendError(t, err)
		if attempts != 1 || be.Class != backends.ClassUnavailable || !strings.Contains(be.Message, "cannot reach the driver at unix://"+path) {
			t.Fatalf("call %d: %d attempts, %v %q; want 1 attempt, unavailable, cannot reach", i, attempts, be.Class, be.Message)
		}
	}
	const open = `backend "drv": circuit open after 3 consecutive failures; retrying in 5s`
	for i := range 5 {
		attempts, err := create(t, b, "a")
		be := asBackendError(t, err)
		if attempts != 0 || be.Class != backends.ClassUnavailable || be.Message != open {
			t.Fatalf("open call %d: %d attempts, %v %q; want 0 attempts, unavailable, %q", i, attempts, be.Class, be.Message, open)
		}
	}
	if got := b.Breakers()[0].Rejected(); got != 5 {
		t.Errorf("%d calls failed fast, want 5", got)
	}

	drv := startDriverAt(t, path) // the driver comes back...
	clock.Advance(4 * time.Second)
	if _, err := create(t, b, "a"); err == nil || drv.requests() != 0 {
		t.Fatalf("a call went through during the cool-down: %v, %d requests", err, drv.requests())
	}
	clock.Advance(time.Second) // ...and the cool-down passes: the next call is the trial
	if b.Breakers()[0].State() != backends.BreakerHalfOpen {
		t.Fatalf("state %v, want half-open", b.Breakers()[0].State())
	}
	for i := range 3 {
		if attempts, err := create(t, b, "a"); err != nil || attempts != 1 {
			t.Fatalf("call %d after the driver came back: %d attempts, %v", i, attempts, err)
		}
	}
	if drv.requests() != 3 || b.Breakers()[0].State() != backends.BreakerClosed {
		t.Errorf("%d requests, state %v; want 3, closed", drv.requests(), b.Breakers()[0].State())
	}
}

// TestBreakerFastFailDoesNotTouchDriver: a driver that answers UNAVAILABLE itself opens the
// circuit like an unreachable one; then neither Unary nor Stream calls reach it. A failed
// trial reopens the circuit for twice as long.
func TestBreakerFastFailDoesNotTouchDriver(t *testing.T) {
	path := socketPath(t, "busy.sock")
	drv := startDriverAt(t, path)
	clock := testutil.NewClock()
	b := breakerBackend(t, "unix://"+path, 2, clock)
	unavailable := "code-" + strconv.Itoa(int(codes.Unavailable))
	for range 2 {
		if _, err := create(t, b, unavailable); asBackendError(t, err).Class != backends.ClassUnavailable {
			t.Fatalf("driver's UNAVAILABLE became %v", err)
		}
	}
	if drv.requests() != 2 || b.Breakers()[0].State() != backends.BreakerOpen {
		t.Fatalf("%d requests, state %v; want 2, open", drv.requests(), b.Breakers()[0].State())
	}

	for range 10 {
		create(t, b, "a")
	}
	f := startFront(t, b, false)
	stream, err := csi.NewSnapshotMetadataClient(f.conn).GetMetadataAllocated(t.Context(), &csi.GetMetadataAllocatedRequest{SnapshotId: "s"})
	if err == nil {
		_, err = stream.Recv()
	}
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "circuit open after 2 consecutive failures") {
		t.Errorf("stream on an open circuit: %v", err)
	}
	if drv.requests() != 2 {
		t.Errorf("%d requests reached the driver while the circuit was open, want 2", drv.requests())
	}

	clock.Advance(5 * time.Second)
	create(t, b, unavailable) // the trial fails
	if st := b.Breakers()[0].Status(); st.State != backends.BreakerOpen || st.RetryIn != 10*time.Second || drv.requests() != 3 {
		t.Errorf("after a failed trial: %+v, %d requests; want open for 10s, 3 requests", st, drv.requests())
	}
}

// TestBreakerIgnoresAnswers: answers that are not transient never open the circuit, and a
// caller that goes away says nothing about the driver.
func TestBreakerIgnoresAnswers(t *testing.T) {
	path := socketPath(t, "answers.sock")
	drv := startDriverAt(t, path)
	clock := testutil.NewClock()
	b := breakerBackend(t, "unix://"+path, 2, clock)
	for _, c := range []codes.Code{codes.NotFound, codes.InvalidArgument, codes.AlreadyExists, codes.FailedPrecondition,
		codes.ResourceExhausted, codes.Internal, codes.Aborted, codes.NotFound} {
		if _, err := create(t, b, "code-"+strconv.Itoa(int(c))); err == nil {
			t.Fatalf("code %v: no error", c)
		}
	}
	for range 3 {
		// The caller leaves once the driver has its request (a fixed delay could end the call
		// before it got there on a loaded machine, and the driver would never see it).
		ctx, cancel := context.WithCancel(t.Context())
		before := drv.requests()
		go func() {
			for drv.requests() == before && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		if _, err := b.Unary(ctx, createVolume, mustMarshal(t, &csi.CreateVolumeRequest{Name: "slow"})); asBackendError(t, err).Class != backends.ClassCanceled {
			t.Fatalf("canceled call: %v", err)
		}
	}
	if st := b.Breakers()[0].Status(); st.State != backends.BreakerClosed || st.Failures != 0 || drv.requests() != 11 {
		t.Errorf("%+v, %d requests; want closed with no failures, 11 requests", st, drv.requests())
	}
}

// TestBreakerDisabled: with the breaker off, every call goes to the driver.
func TestBreakerDisabled(t *testing.T) {
	b := newBackend(t, "unix://"+socketPath(t, "gone.sock"), WithCircuitBreaker(backends.BreakerConfig{Disable: true}))
	for i := range 10 {
		if attempts, err := create(t, b, "a"); attempts != 1 || err == nil {
			t.Fatalf("call %d: %d attempts, %v", i, attempts, err)
		}
	}
	if b.Breakers() != nil {
		t.Error("Breakers() is not nil with the breaker disabled")
	}
}

// TestBreakerConfigErrors: New names the keys of invalid breaker settings, one per line.
func TestBreakerConfigErrors(t *testing.T) {
	_, err := New("drv", Config{Target: "unix:///run/drv.sock"},
		WithCircuitBreaker(backends.BreakerConfig{Failures: -2, CoolDown: time.Minute, MaxCoolDown: time.Second}))
	want := "backends.drv.circuitBreaker.failures: -2 is negative; use the number of failures in a row that opens the circuit, such as 5\n" +
		"backends.drv.circuitBreaker.maxCoolDown: 1s is shorter than coolDown (1m0s)"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
