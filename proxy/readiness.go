package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
)

// Defaults of a Readiness.
const (
	defaultReadyTTL     = 2 * time.Second
	defaultReadyTimeout = 2 * time.Second
)

// errNotListening is the answer while the CSI listeners are not serving.
var errNotListening = errors.New("csi-gateway is not ready: its CSI listeners are not serving yet (starting) or any more (shutting down)")

// ReadinessOption configures a Readiness built by NewReadiness.
type ReadinessOption func(*Readiness)

// WithReadyCacheTTL sets how long the result of checking the backends is reused (default 2 s),
// so a storm of probes costs the backends one check per TTL. Zero or less checks on every
// Check; checks running at the same time still share one round of backend calls.
func WithReadyCacheTTL(d time.Duration) ReadinessOption {
	return func(r *Readiness) { r.ttl = max(d, 0) }
}

// WithReadyTimeout bounds each backend's Ready call (default 2 s); a backend that has not
// answered by then counts as not ready. Zero or less keeps the default.
func WithReadyTimeout(d time.Duration) ReadinessOption {
	return func(r *Readiness) {
		if d > 0 {
			r.timeout = d
		}
	}
}

// WithReadyMetrics reports each backend's state after every check into m's
// csigw_backend_ready gauge.
func WithReadyMetrics(m *Metrics) ReadinessOption {
	return func(r *Readiness) { r.metrics = m }
}

// Readiness answers whether the gateway can take calls now: its CSI listeners are serving and
// every backend's Ready succeeds. It is what /readyz reports. It is safe for concurrent use.
type Readiness struct {
	names    []string // sorted
	backends map[string]backends.Backend
	ttl      time.Duration
	timeout  time.Duration
	metrics  *Metrics
	now      func() time.Time

	listening atomic.Bool

	mu      sync.Mutex
	last    *readyResult // nil until a check has finished
	running *readyRun    // the check under way, or nil
}

// readyResult is a finished check.
type readyResult struct {
	at   time.Time
	errs backendErrors
}

// readyRun is a check under way; done is closed when errs is set.
type readyRun struct {
	done chan struct{}
	errs backendErrors
}

// backendErrors are the failures of one check, by backend name (a ready backend has none).
type backendErrors map[string]error

// of joins the failures of the backends named (all of them when names is nil), in name
// order, into the error Check returns; nil when each of them is ready.
func (e backendErrors) of(all, names []string) error {
	if names == nil {
		names = all
	}
	var reasons []string
	for _, name := range all {
		if err := e[name]; err != nil && slices.Contains(names, name) {
			reasons = append(reasons, err.Error())
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	return errors.New("csi-gateway is not ready: " + strings.Join(reasons, "; "))
}

// NewReadiness returns a Readiness over bes (the map is copied; the backends stay the
// caller's). It reports not ready until SetListening(true).
func NewReadiness(bes map[string]backends.Backend, opts ...ReadinessOption) *Readiness {
	r := &Readiness{
		backends: make(map[string]backends.Backend, len(bes)),
		ttl:      defaultReadyTTL,
		timeout:  defaultReadyTimeout,
		now:      time.Now,
	}
	for name, b := range bes {
		r.backends[name] = b
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetListening records whether every CSI listener is serving: call it with true once they all
// are, and with false when shutdown begins, so the gateway is taken out of service before it
// stops answering.
func (r *Readiness) SetListening(ok bool) { r.listening.Store(ok) }

// Check returns nil when the gateway is ready, or an error that names each backend that is
// not and why (sorted by backend name), or says that the listeners are not serving. Backends
// are checked concurrently, each within the Ready timeout, and the result is reused for the
// cache TTL; callers arriving while a check runs wait for that check rather than start their
// own. When ctx ends first, Check returns ctx's error; the check goes on for the next caller.
func (r *Readiness) Check(ctx context.Context) error {
	return r.CheckBackends(ctx, nil)
}

// CheckBackends is Check for the backends named only (every backend when names is nil): the
// listeners must be serving and each of these backends ready. It shares Check's cache and
// checks, so asking about a few backends costs no more than asking about all.
func (r *Readiness) CheckBackends(ctx context.Context, names []string) error {
	if !r.listening.Load() {
		return errNotListening
	}
	r.mu.Lock()
	if r.last != nil && r.now().Sub(r.last.at) < r.ttl {
		errs := r.last.errs
		r.mu.Unlock()
		return errs.of(r.names, names)
	}
	run := r.running
	if run == nil {
		run = &readyRun{done: make(chan struct{})}
		r.running = run
		// Detached from ctx: the caller that starts a check must not cut it short for the
		// callers that join it. Each backend's timeout bounds it.
		go r.run(run)
	}
	r.mu.Unlock()
	select {
	case <-run.done:
		return run.errs.of(r.names, names)
	case <-ctx.Done():
		return fmt.Errorf("csi-gateway readiness: the check did not finish: %w", ctx.Err())
	}
}

// run checks every backend, publishes the result and releases the callers waiting on it.
func (r *Readiness) run(run *readyRun) {
	errs := r.checkBackends()
	r.mu.Lock()
	r.last = &readyResult{at: r.now(), errs: errs}
	r.running = nil
	r.mu.Unlock()
	run.errs = errs
	close(run.done)
}

// checkBackends calls every backend's Ready at once and returns the failures.
func (r *Readiness) checkBackends() backendErrors {
	errs := make([]error, len(r.names))
	var wg sync.WaitGroup
	for i, name := range r.names {
		wg.Go(func() { errs[i] = r.checkBackend(name, r.backends[name]) })
	}
	wg.Wait()
	failed := backendErrors{}
	for i, name := range r.names {
		if r.metrics != nil {
			r.metrics.setBackendReady(name, errs[i] == nil)
		}
		if errs[i] != nil {
			failed[name] = errs[i]
		}
	}
	return failed
}

// checkBackend calls b.Ready within the timeout. A backend that ignores its context and
// answers late is not waited for: its answer is dropped when it comes.
func (r *Readiness) checkBackend(name string, b backends.Backend) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				res <- fmt.Errorf("its readiness check panicked: %v", p)
			}
		}()
		res <- b.Ready(ctx)
	}()
	var err error
	select {
	case err = <-res:
	case <-ctx.Done():
		err = fmt.Errorf("did not answer its readiness check within %v", r.timeout)
	}
	if err == nil {
		return nil
	}
	// Backend errors usually say which backend they come from already; say it once.
	prefix := fmt.Sprintf("backend %q", name)
	if msg := err.Error(); strings.HasPrefix(msg, prefix) {
		return err
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
