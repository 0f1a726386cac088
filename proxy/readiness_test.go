package proxy

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// readyFake is a backend of which only Ready matters: it counts its calls and answers with
// ready(ctx). The embedded nil Backend makes any other method panic.
type readyFake struct {
	backends.Backend
	ready func(ctx context.Context) error
	calls atomic.Int32
}

func (f *readyFake) Ready(ctx context.Context) error {
	f.calls.Add(1)
	if f.ready == nil {
		return nil
	}
	return f.ready(ctx)
}

func failing(msg string) *readyFake {
	return &readyFake{ready: func(context.Context) error { return errors.New(msg) }}
}

// blocking answers nil once release is closed, whatever its context says.
func blocking(release <-chan struct{}) *readyFake {
	return &readyFake{ready: func(context.Context) error { <-release; return nil }}
}

func listening(r *Readiness) *Readiness {
	r.SetListening(true)
	return r
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestReadinessBackends(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name     string
		backends map[string]backends.Backend
		want     string
	}{
		{"none", nil, "<nil>"},
		{"all ready", map[string]backends.Backend{"a": &readyFake{}, "b": &readyFake{}}, "<nil>"},
		{"one failing", map[string]backends.Backend{"a": &readyFake{}, "b": failing("Identity/Probe: connection refused")},
			`csi-gateway is not ready: backend "b": Identity/Probe: connection refused`},
		{"named once", map[string]backends.Backend{"b": failing(`backend "b": the appliance is not ready`)},
			`csi-gateway is not ready: backend "b": the appliance is not ready`},
		{"several, in name order", map[string]backends.Backend{"z": failing("down"), "a": failing("gone"), "m": &readyFake{}},
			`csi-gateway is not ready: backend "a": gone; backend "z": down`},
		{"slow past the timeout", map[string]backends.Backend{"slow": blocking(release), "a": &readyFake{}},
			`csi-gateway is not ready: backend "slow": did not answer its readiness check within 50ms`},
		{"panicking", map[string]backends.Backend{"p": &readyFake{ready: func(context.Context) error { panic("oops") }}},
			`csi-gateway is not ready: backend "p": its readiness check panicked: oops`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := listening(NewReadiness(tt.backends, WithReadyTimeout(50*time.Millisecond)))
			start := time.Now()
			err := r.Check(context.Background())
			if got := errText(err); got != tt.want {
				t.Errorf("Check = %s\nwant    %s", got, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Check took %v", d)
			}
		})
	}
}

// TestReadinessOtherChecks: a check that is not a backend (the tenancy ledger's store) is
// reported under its own name, after the backends', and bounded by the same timeout.
func TestReadinessOtherChecks(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r := listening(NewReadiness(map[string]backends.Backend{"a": failing("gone")},
		WithReadyCheck("the tenancy ledger in etcd https://127.0.0.1:2379", failing("etcdserver: no leader").Ready),
		WithReadyCheck("slow", blocking(release).Ready),
		WithReadyCheck("fine", (&readyFake{}).Ready),
		WithReadyTimeout(50*time.Millisecond)))
	want := `csi-gateway is not ready: backend "a": gone; the tenancy ledger in etcd https://127.0.0.1:2379: etcdserver: no leader; slow: did not answer its readiness check within 50ms`
	if got := errText(r.Check(context.Background())); got != want {
		t.Errorf("Check = %s\nwant    %s", got, want)
	}
	// Asked about some backends only (gRPC health of a service), the others are not reasons.
	if got := errText(r.CheckBackends(context.Background(), []string{"a"})); got != `csi-gateway is not ready: backend "a": gone` {
		t.Errorf("CheckBackends(a) = %s; want backend a's failure only", got)
	}
}

// TestReadinessNotListening: not ready before SetListening(true) and after SetListening(false),
// without asking any backend.
func TestReadinessNotListening(t *testing.T) {
	b := &readyFake{}
	r := NewReadiness(map[string]backends.Backend{"a": b})
	want := "csi-gateway is not ready: its CSI listeners are not serving yet (starting) or any more (shutting down)"
	if got := errText(r.Check(context.Background())); got != want {
		t.Errorf("before SetListening: %s, want %s", got, want)
	}
	r.SetListening(true)
	if err := r.Check(context.Background()); err != nil {
		t.Errorf("listening: %v", err)
	}
	r.SetListening(false)
	if got := errText(r.Check(context.Background())); got != want {
		t.Errorf("after SetListening(false): %s, want %s", got, want)
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("Ready was called %d times, want once (only while listening)", n)
	}
}

// TestReadinessConcurrentBackends: backends are checked at the same time — each of these
// answers only once the other has been asked too.
func TestReadinessConcurrentBackends(t *testing.T) {
	var asked sync.WaitGroup
	asked.Add(2)
	meet := func(context.Context) error { asked.Done(); asked.Wait(); return nil }
	r := listening(NewReadiness(map[string]backends.Backend{
		"a": &readyFake{ready: meet}, "b": &readyFake{ready: meet},
	}, WithReadyTimeout(10*time.Second)))
	if err := r.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReadinessCacheTTL: within the TTL every answer (success or failure) is reused; after it,
// the backends are asked again.
func TestReadinessCacheTTL(t *testing.T) {
	clock := testutil.NewClock()
	var healthy atomic.Bool
	b := &readyFake{ready: func(context.Context) error {
		if healthy.Load() {
			return nil
		}
		return errors.New("warming up")
	}}
	r := listening(NewReadiness(map[string]backends.Backend{"a": b}))
	r.now = clock.Now
	check := func(want string) {
		t.Helper()
		if got := errText(r.Check(context.Background())); got != want {
			t.Errorf("Check = %s, want %s", got, want)
		}
	}
	const down = `csi-gateway is not ready: backend "a": warming up`
	for range 10 {
		check(down)
	}
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("Ready called %d times for 10 checks within the TTL, want 1", n)
	}
	healthy.Store(true)
	clock.Advance(1999 * time.Millisecond)
	check(down) // still cached: the default TTL is 2 s
	clock.Advance(time.Millisecond)
	check("<nil>")
	check("<nil>")
	if n := b.calls.Load(); n != 2 {
		t.Errorf("Ready called %d times, want 2", n)
	}

	// With no TTL every check asks.
	b2 := &readyFake{}
	r2 := listening(NewReadiness(map[string]backends.Backend{"a": b2}, WithReadyCacheTTL(0)))
	for range 3 {
		r2.Check(context.Background())
	}
	if n := b2.calls.Load(); n != 3 {
		t.Errorf("TTL 0: Ready called %d times for 3 checks, want 3", n)
	}
}

// TestReadinessProbeStorm: checks that arrive while one runs share it: one Ready call for all.
func TestReadinessProbeStorm(t *testing.T) {
	release := make(chan struct{})
	b := blocking(release)
	r := listening(NewReadiness(map[string]backends.Backend{"a": b}, WithReadyCacheTTL(0), WithReadyTimeout(time.Minute)))
	const probes = 50
	errs := make(chan error, probes)
	for range probes {
		go func() { errs <- r.Check(context.Background()) }()
	}
	// Let them all arrive, then let the one check finish.
	deadline := time.Now().Add(5 * time.Second)
	for b.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	for range probes {
		if err := <-errs; err != nil {
			t.Errorf("Check: %v", err)
		}
	}
	// Checks that arrived after the shared one ended start their own; most joined it.
	if n := b.calls.Load(); n < 1 || n > probes/2 {
		t.Errorf("Ready called %d times for %d concurrent checks", n, probes)
	}
}

// TestReadinessCallerGivesUp: a caller whose context ends stops waiting; the check it started
// still finishes for the next caller.
func TestReadinessCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	b := blocking(release)
	r := listening(NewReadiness(map[string]backends.Backend{"a": b}, WithReadyTimeout(time.Minute)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := r.Check(ctx)
	if want := "csi-gateway readiness: the check did not finish: context deadline exceeded"; errText(err) != want {
		t.Errorf("Check = %s, want %s", errText(err), want)
	}
	close(release)
	if err := r.Check(context.Background()); err != nil {
		t.Errorf("next Check = %v", err)
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("Ready called %d times, want 1", n)
	}
}

// TestReadinessMetrics: every check sets csigw_backend_ready per backend.
func TestReadinessMetrics(t *testing.T) {
	m := NewMetrics("d", prometheus.NewRegistry())
	var healthy atomic.Bool
	flaky := &readyFake{ready: func(context.Context) error {
		if healthy.Load() {
			return nil
		}
		return errors.New("down")
	}}
	r := listening(NewReadiness(map[string]backends.Backend{"up": &readyFake{}, "flaky": flaky},
		WithReadyMetrics(m), WithReadyCacheTTL(0)))
	gauge := func(backend string) float64 {
		return metricValue(scrape(t, m.Handler()), "csigw_backend_ready", map[string]string{"backend": backend})
	}
	if err := r.Check(context.Background()); err == nil {
		t.Fatal("Check = nil with a failing backend")
	}
	if up, fl := gauge("up"), gauge("flaky"); up != 1 || fl != 0 {
		t.Errorf("csigw_backend_ready up=%v flaky=%v, want 1 and 0", up, fl)
	}
	healthy.Store(true)
	if err := r.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fl := gauge("flaky"); fl != 1 {
		t.Errorf("csigw_backend_ready flaky=%v after recovery, want 1", fl)
	}
}
