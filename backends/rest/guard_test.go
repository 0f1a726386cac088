package rest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// guardedBackend is newBackend with the breakers and budget reading clock.
func guardedBackend(t *testing.T, cfg Config, clock *testutil.Clock, urls ...string) *Backend {
	t.Helper()
	cfg.URLs = urls
	cfg.AllowSecretsOverPlaintextHTTP = true // httptest's http://, and createRequest's secret
	if cfg.Retry.MinBackoff == 0 {
		cfg.Retry.MinBackoff = time.Millisecond
	}
	if cfg.Retry.MaxBackoff == 0 {
		cfg.Retry.MaxBackoff = 2 * time.Millisecond
	}
	b, err := New(testName, cfg, func(o *options) { o.now = clock.Now })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// switchable answers as its mode says: "503", "ok", "hang" (until the request ends) or
// "notfound" (a connect not_found error).
func switchable(mode *atomic.Value) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "ok":
			reply(200, "application/json", created)(n, w, r)
		case "hang":
			<-r.Context().Done()
		case "notfound":
			reply(404, "application/json", `{"code":"not_found","message":"no such volume"}`)(n, w, r)
		default:
			reply(503, "text/plain", "busy")(n, w, r)
		}
	}
}

// TestBudgetHoldsUnder503Storm: an appliance that answers 503 forever, 50 calls at once, each
// allowed 10 attempts: the budget keeps the requests to calls × (1 + ratio) + the reserve.
func TestBudgetHoldsUnder503Storm(t *testing.T) {
	const calls, ratio, minPerSecond = 50, 0.2, 3
	srv := newServer(t, reply(503, "text/plain", "busy"))
	b := guardedBackend(t, Config{
		Retry:   Retry{MaxAttempts: 10},
		Breaker: backends.BreakerConfig{Disable: true}, // the budget alone
		Budget:  backends.BudgetConfig{Ratio: ratio, MinPerSecond: minPerSecond, Window: 10 * time.Second},
	}, testutil.NewClock(), srv.URL)

	var wg sync.WaitGroup
	errs := make([]error, calls)
	req := createRequest(t)
	for i := range calls {
		wg.Go(func() { _, errs[i] = b.Unary(t.Context(), createPath, req) })
	}
	wg.Wait()
	spent := 0
	for _, err := range errs {
		e := checkError(t, err, backends.ClassUnavailable, "HTTP 503 Service Unavailable: busy")
		if strings.Contains(e.Message, "the retry budget is spent (backends.array1.retryBudget: retries may add 20% to the calls of the last 10s, plus 3 a second)") {
			spent++
		}
	}
	reserve := minPerSecond * 10
	limit := int32(calls*(1+ratio)) + int32(reserve)
	// Every call wants 9 retries and is refused only once the reserve is used up.
	if hits := srv.hits.Load(); hits > limit || hits < calls+int32(reserve) {
		t.Errorf("the appliance got %d requests for %d calls; want between %d and %d", hits, calls, calls+reserve, limit)
	}
	if spent == 0 || b.RetryBudget().Refused() != uint64(spent) {
		t.Errorf("%d calls said the budget was spent, %d retries refused; want as many, and some", spent, b.RetryBudget().Refused())
	}
}

// TestBudgetSpentMessage: a retry the budget refuses ends the call with the last answer's
// class and says why.
func TestBudgetSpentMessage(t *testing.T) {
	srv := newServer(t, reply(502, "text/plain", "no upstream"))
	b := guardedBackend(t, Config{
		Retry:  Retry{MaxAttempts: 5},
		Budget: backends.BudgetConfig{Ratio: 0.0001, MinPerSecond: 0.0001, Window: 10 * time.Second},
	}, testutil.NewClock(), srv.URL)
	ctx, info := callContext(t)
	_, err := b.Unary(ctx, createPath, createRequest(t))
	checkError(t, err, backends.ClassUnavailable, `backend "array1": CreateVolume: HTTP 502 Bad Gateway: no upstream`,
		"; gave up after 1 attempt: the retry budget is spent (backends.array1.retryBudget: ")
	if info.Attempts() != 1 || srv.hits.Load() != 1 || b.RetryBudget().Refused() != 1 {
		t.Errorf("%d attempts, %d requests, %d refused; want 1 each", info.Attempts(), srv.hits.Load(), b.RetryBudget().Refused())
	}
}

// TestBreakerOpensAndRecovers: transient failures open the URL's circuit; calls then fail
// fast without a request; after the cool-down one trial goes through and closes it.
func TestBreakerOpensAndRecovers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxAttempts int
		wantFirst   []string // fragments of the error of the first call(s)
		calls       int      // calls until the circuit opens
	}{
		{"one attempt per call", 1, []string{"HTTP 503 Service Unavailable: busy"}, 3},
		{"retries stop when the circuit opens", 5, []string{"HTTP 503 Service Unavailable: busy", "; gave up after 3 attempts: circuit open for "}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mode atomic.Value
			mode.Store("503")
			srv := newServer(t, switchable(&mode))
			clock := testutil.NewClock()
			b := guardedBackend(t, Config{Retry: Retry{MaxAttempts: tc.maxAttempts}, Breaker: backends.BreakerConfig{Failures: 3, CoolDown: 5 * time.Second, MaxCoolDown: time.Minute}}, clock, srv.URL)
			for range tc.calls {
				_, err := b.Unary(t.Context(), createPath, createRequest(t))
				checkError(t, err, backends.ClassUnavailable, tc.wantFirst...)
			}
			if srv.hits.Load() != 3 || b.Breakers()[0].State() != backends.BreakerOpen {
				t.Fatalf("%d requests, circuit %v; want 3, open", srv.hits.Load(), b.Breakers()[0].State())
			}

			ctx, info := callContext(t)
			_, err := b.Unary(ctx, createPath, createRequest(t))
			e := checkError(t, err, backends.ClassUnavailable)
			want := `backend "array1": CreateVolume: circuit open for ` + srv.URL + ` after 3 consecutive failures; retrying in 5s`
			if e.Message != want {
				t.Errorf("message %q, want %q", e.Message, want)
			}
			if srv.hits.Load() != 3 || info.Attempts() != 0 {
				t.Errorf("a fast failure sent a request: %d requests, %d attempts", srv.hits.Load(), info.Attempts())
			}

			mode.Store("ok")
			clock.Advance(5 * time.Second)
			for i := range 3 {
				if _, err := b.Unary(t.Context(), createPath, createRequest(t)); err != nil {
					t.Fatalf("call %d after the cool-down: %v", i, err)
				}
			}
			if srv.hits.Load() != 6 || b.Breakers()[0].State() != backends.BreakerClosed {
				t.Errorf("%d requests, circuit %v; want 6, closed", srv.hits.Load(), b.Breakers()[0].State())
			}
		})
	}
}

// TestBreakerCountsOnlyTransientFailures: answers such as not-found, and refused
// connections, are told apart: the first never open the circuit, the second do.
func TestBreakerCountsOnlyTransientFailures(t *testing.T) {
	var mode atomic.Value
	mode.Store("notfound")
	srv := newServer(t, switchable(&mode))
	clock := testutil.NewClock()
	b := guardedBackend(t, Config{Retry: Retry{MaxAttempts: 1}, Breaker: backends.BreakerConfig{Failures: 2, CoolDown: 5 * time.Second, MaxCoolDown: time.Minute}}, clock, srv.URL)
	for range 10 {
		_, err := b.Unary(t.Context(), createPath, createRequest(t))
		checkError(t, err, backends.ClassNotFound, "no such volume")
	}
	if srv.hits.Load() != 10 || b.Breakers()[0].State() != backends.BreakerClosed {
		t.Errorf("%d requests, circuit %v; want 10, closed", srv.hits.Load(), b.Breakers()[0].State())
	}

	down := refusedURL(t)
	b = guardedBackend(t, Config{Retry: Retry{MaxAttempts: 1}, Breaker: backends.BreakerConfig{Failures: 2, CoolDown: 5 * time.Second, MaxCoolDown: time.Minute}}, clock, down)
	for range 2 {
		_, err := b.Unary(t.Context(), createPath, createRequest(t))
		checkError(t, err, backends.ClassUnavailable, "cannot connect to "+down)
	}
	_, err := b.Unary(t.Context(), createPath, createRequest(t))
	checkError(t, err, backends.ClassUnavailable, "circuit open for "+down+" after 2 consecutive failures; retrying in 5s")
}

// TestFailoverSkipsOpenURL: a URL whose circuit is open is skipped like one that refuses
// connections, without a request and without spending the budget; its trial comes after
// the cool-down.
func TestFailoverSkipsOpenURL(t *testing.T) {
	busy := newServer(t, reply(503, "text/plain", "busy"))
	good := newServer(t, reply(200, "application/json", created))
	clock := testutil.NewClock()
	b := guardedBackend(t, Config{
		Retry:   Retry{MaxAttempts: 3},
		Breaker: backends.BreakerConfig{Failures: 2, CoolDown: 5 * time.Second, MaxCoolDown: time.Minute},
		Budget:  backends.BudgetConfig{Ratio: 0.0001, MinPerSecond: 0.1, Window: 10 * time.Second}, // one retry
	}, clock, busy.URL, good.URL)

	steps := []struct {
		name           string
		advance        time.Duration
		attempts       int
		busyN, goodN   int32
		wantBusyRetry  time.Duration
		wantBusyFailed int
	}{
		// 503 (retried once: the budget's one retry), 503 opens the circuit, the next
		// attempt skips to the good URL: a first attempt there, not counted as a retry.
		{"the circuit opens during a call", 0, 3, 2, 1, 5 * time.Second, 2},
		{"an open URL is skipped from the start", 0, 1, 2, 2, 5 * time.Second, 2},
		{"after the cool-down the trial fails", 5 * time.Second, 2, 3, 3, 10 * time.Second, 3},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		b.preferred.Store(0)
		ctx, info := callContext(t)
		if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		st := b.Breakers()[0].Status()
		if info.Attempts() != s.attempts || busy.hits.Load() != s.busyN || good.hits.Load() != s.goodN ||
			st.State != backends.BreakerOpen || st.RetryIn != s.wantBusyRetry || st.Failures != s.wantBusyFailed {
			t.Errorf("%s: %d attempts, requests %d busy and %d good, busy URL %+v; want %d, %d, %d, open for %v after %d",
				s.name, info.Attempts(), busy.hits.Load(), good.hits.Load(), st, s.attempts, s.busyN, s.goodN, s.wantBusyRetry, s.wantBusyFailed)
		}
	}
	if b.RetryBudget().Refused() != 0 {
		t.Errorf("%d retries refused; failovers must not spend the budget", b.RetryBudget().Refused())
	}
}

// TestAllCircuitsOpen: when every URL's circuit is open the call fails fast and says so for
// each; Ready still asks the appliance.
func TestAllCircuitsOpen(t *testing.T) {
	var mode atomic.Value
	mode.Store("503")
	a, c := newServer(t, switchable(&mode)), newServer(t, switchable(&mode))
	clock := testutil.NewClock()
	b := guardedBackend(t, Config{Retry: Retry{MaxAttempts: 1}, Breaker: backends.BreakerConfig{Failures: 1, CoolDown: 5 * time.Second, MaxCoolDown: time.Minute}}, clock, a.URL, c.URL)
	for _, i := range []int32{0, 1} {
		b.preferred.Store(i)
		b.Unary(t.Context(), createPath, createRequest(t))
	}
	clock.Advance(2 * time.Second)
	_, err := b.Unary(t.Context(), createPath, createRequest(t))
	e := checkError(t, err, backends.ClassUnavailable)
	want := `backend "array1": CreateVolume: circuit open for ` + c.URL + ` after 1 consecutive failures; retrying in 3s; circuit open for ` +
		a.URL + ` after 1 consecutive failures; retrying in 3s`
	if e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	mode.Store("ok")
	if err := b.Ready(t.Context()); err != nil {
		t.Errorf("Ready with the circuits open: %v", err)
	}
	if a.hits.Load()+c.hits.Load() != 3 {
		t.Errorf("%d requests, want 3 (two calls and Ready)", a.hits.Load()+c.hits.Load())
	}
}

// TestCanceledTrialIsReleased: a trial whose caller goes away says nothing about the URL; the
// next call is the trial.
func TestCanceledTrialIsReleased(t *testing.T) {
	var mode atomic.Value
	mode.Store("503")
	srv := newServer(t, switchable(&mode))
	clock := testutil.NewClock()
	b := guardedBackend(t, Config{Retry: Retry{MaxAttempts: 1}, Breaker: backends.BreakerConfig{Failures: 1, CoolDown: 5 * time.Second, MaxCoolDown: time.Minute}}, clock, srv.URL)
	b.Unary(t.Context(), createPath, createRequest(t))
	clock.Advance(5 * time.Second)

	mode.Store("hang")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := b.Unary(ctx, createPath, createRequest(t))
		done <- err
	}()
	for srv.hits.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Unary(t.Context(), createPath, createRequest(t)); err == nil || !strings.Contains(err.Error(), "a trial call is under way") {
		t.Errorf("a second call during the trial: %v", err)
	}
	cancel()
	checkError(t, <-done, backends.ClassCanceled)
	mode.Store("ok")
	if _, err := b.Unary(t.Context(), createPath, createRequest(t)); err != nil {
		t.Fatalf("the call after a canceled trial: %v", err)
	}
	if b.Breakers()[0].State() != backends.BreakerClosed {
		t.Errorf("circuit %v, want closed", b.Breakers()[0].State())
	}
}

// TestGuardsDisabled: with both disabled, nothing is kept and nothing fails fast.
func TestGuardsDisabled(t *testing.T) {
	srv := newServer(t, reply(503, "text/plain", "busy"))
	b := newBackend(t, Config{Retry: Retry{MaxAttempts: 2}, Breaker: backends.BreakerConfig{Disable: true}, Budget: backends.BudgetConfig{Disable: true}}, srv.URL)
	for range 20 {
		_, err := b.Unary(t.Context(), createPath, createRequest(t))
		checkError(t, err, backends.ClassUnavailable, "gave up after 2 attempts")
	}
	if srv.hits.Load() != 40 || b.Breakers() != nil || b.RetryBudget() != nil {
		t.Errorf("%d requests, breakers %v, budget %v; want 40, none, none", srv.hits.Load(), b.Breakers(), b.RetryBudget())
	}
}

// TestGuardConfigKeyPaths: errors in the guards' settings name their full keys.
func TestGuardConfigKeyPaths(t *testing.T) {
	_, err := New("array1", Config{URLs: []string{"http://a"},
		Breaker: backends.BreakerConfig{Failures: -1, CoolDown: 10 * time.Second, MaxCoolDown: time.Second},
		Budget:  backends.BudgetConfig{Ratio: -1, Window: time.Millisecond}})
	if err == nil {
		t.Fatal("New accepted the config")
	}
	want := []string{
		"backends.array1.circuitBreaker.failures: -1 is negative",
		"backends.array1.circuitBreaker.maxCoolDown: 1s is shorter than coolDown (10s)",
		"backends.array1.retryBudget.ratio: -1 is not a fraction of the calls",
		"backends.array1.retryBudget.window: 1ms is shorter than 1s",
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("error:\n%s\nwant %d lines", err, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start with %q", i, lines[i], w)
		}
	}
	c, err := Config{URLs: []string{"http://a"}}.withDefaults()
	if err != nil || c.Breaker != (backends.BreakerConfig{Failures: 5, CoolDown: time.Second, MaxCoolDown: 30 * time.Second}) ||
		c.Budget != (backends.BudgetConfig{Ratio: 0.2, MinPerSecond: 3, Window: 10 * time.Second}) {
		t.Errorf("defaults %+v %+v, %v", c.Breaker, c.Budget, err)
	}
}
