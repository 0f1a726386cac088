package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// newTestBreaker returns a breaker for "arr" with the fake clock clock.
func newTestBreaker(target string, cfg BreakerConfig, clock *testutil.Clock) *Breaker {
	b := NewBreaker("arr", target, cfg)
	b.SetClock(clock.Now)
	return b
}

// call admits one call on b and reports err as its outcome; it returns Admit's error.
func call(b *Breaker, err error) error {
	p, aerr := b.Admit()
	if aerr != nil {
		return aerr
	}
	p.Done(err)
	return nil
}

var (
	errUnavailable = Errorf(ClassUnavailable, "down")
	errDeadline    = Errorf(ClassDeadline, "slow")
	errNotFound    = Errorf(ClassNotFound, "no such volume")
	errInvalid     = Errorf(ClassInvalid, "bad request")
	errExhausted   = Errorf(ClassExhausted, "rate-limited")
)

// TestBreakerOutcomes: which sequences of outcomes open the circuit (3 failures here).
func TestBreakerOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		outcomes []error
		want     BreakerState
		failures int
	}{
		{"three unavailable in a row open", []error{errUnavailable, errUnavailable, errUnavailable}, BreakerOpen, 3},
		{"deadlines count as failures", []error{errDeadline, errDeadline, errDeadline}, BreakerOpen, 3},
		{"unavailable and deadline mix", []error{errUnavailable, errDeadline, errUnavailable}, BreakerOpen, 3},
		{"context deadline counts", []error{context.DeadlineExceeded, errUnavailable, errUnavailable}, BreakerOpen, 3},
		{"two are not enough", []error{errUnavailable, errUnavailable}, BreakerClosed, 2},
		{"a success resets the count", []error{errUnavailable, errUnavailable, nil, errUnavailable, errUnavailable}, BreakerClosed, 2},
		{"not-found is an answer", []error{errUnavailable, errUnavailable, errNotFound, errUnavailable, errUnavailable}, BreakerClosed, 2},
		{"non-transient errors never open", []error{errNotFound, errInvalid, errExhausted, errNotFound, errInvalid, errExhausted}, BreakerClosed, 0},
		{"unclassified errors are internal: an answer", []error{errors.New("x"), errors.New("y"), errors.New("z")}, BreakerClosed, 0},
		{"a canceled call says nothing", []error{errUnavailable, errUnavailable, context.Canceled, Errorf(ClassCanceled, "gone"), errUnavailable}, BreakerOpen, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBreaker("", BreakerConfig{Failures: 3}, testutil.NewClock())
			for i, err := range tc.outcomes {
				if aerr := call(b, err); aerr != nil {
					t.Fatalf("call %d refused: %v", i, aerr)
				}
			}
			if got := b.State(); got != tc.want {
				t.Errorf("state %v, want %v", got, tc.want)
			}
			if got := b.Status().Failures; got != tc.failures {
				t.Errorf("%d failures in a row, want %d", got, tc.failures)
			}
		})
	}
}

// TestBreakerFailsFast: an open circuit refuses calls with a message saying when it retries,
// and counts them.
func TestBreakerFailsFast(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		wait         time.Duration
		want         string
	}{
		{"whole backend", "", 0, `backend "arr": circuit open after 5 consecutive failures; retrying in 5s`},
		{"a target", "https://a.example", 0, `backend "arr": circuit open for https://a.example after 5 consecutive failures; retrying in 5s`},
		{"rounded up to the second", "", 2500 * time.Millisecond, `backend "arr": circuit open after 5 consecutive failures; retrying in 3s`},
		{"below a second in milliseconds", "", 4700 * time.Millisecond, `backend "arr": circuit open after 5 consecutive failures; retrying in 300ms`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testutil.NewClock()
			b := newTestBreaker(tc.target, BreakerConfig{CoolDown: 5 * time.Second}, clock)
			for range 5 {
				if err := call(b, errUnavailable); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(tc.wait)
			err := call(b, nil)
			var e *Error
			if !errors.As(err, &e) || e.Class != ClassUnavailable || e.Message != tc.want {
				t.Fatalf("got %#v, want ClassUnavailable %q", err, tc.want)
			}
			if b.Rejected() != 1 || b.State() != BreakerOpen {
				t.Errorf("rejected %d, state %v; want 1, open", b.Rejected(), b.State())
			}
		})
	}
}

// TestBreakerOneTrialUnderConcurrency: once the cool-down has passed, of many calls at once
// exactly one goes through; the others fail fast until it reports.
func TestBreakerOneTrialUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name      string
		outcome   error
		wantState BreakerState
	}{
		{"trial succeeds", nil, BreakerClosed},
		{"trial answers not-found", errNotFound, BreakerClosed},
		{"trial fails", errDeadline, BreakerOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testutil.NewClock()
			b := newTestBreaker("", BreakerConfig{Failures: 2, CoolDown: time.Second}, clock)
			call(b, errUnavailable)
			call(b, errUnavailable)
			clock.Advance(time.Second)
			if b.State() != BreakerHalfOpen {
				t.Fatalf("state %v after the cool-down, want half-open", b.State())
			}
			var (
				wg      sync.WaitGroup
				start   = make(chan struct{})
				mu      sync.Mutex
				permits []Permit
				refused atomic.Int32
				msg     atomic.Value
			)
			for range 50 {
				wg.Go(func() {
					<-start
					p, err := b.Admit()
					if err != nil {
						refused.Add(1)
						msg.Store(err.Error())
						return
					}
					mu.Lock()
					permits = append(permits, p)
					mu.Unlock()
				})
			}
			close(start)
			wg.Wait()
			if len(permits) != 1 || refused.Load() != 49 {
				t.Fatalf("%d calls admitted and %d refused, want 1 and 49", len(permits), refused.Load())
			}
			want := `backend "arr": circuit open after 2 consecutive failures; a trial call is under way, and calls resume if it succeeds`
			if got := msg.Load(); got != want {
				t.Errorf("refusal %q, want %q", got, want)
			}
			permits[0].Done(tc.outcome)
			if got := b.State(); got != tc.wantState {
				t.Errorf("state %v after the trial, want %v", got, tc.wantState)
			}
			if tc.wantState == BreakerClosed {
				for range 3 {
					if err := call(b, nil); err != nil {
						t.Fatalf("closed circuit refused a call: %v", err)
					}
				}
			}
		})
	}
}

// TestBreakerCoolDownDoubles: each failed trial doubles the cool-down up to the maximum; a
// successful one resets it.
func TestBreakerCoolDownDoubles(t *testing.T) {
	clock := testutil.NewClock()
	b := newTestBreaker("", BreakerConfig{Failures: 1, CoolDown: 5 * time.Second, MaxCoolDown: 12 * time.Second}, clock)
	call(b, errUnavailable)
	for i, coolDown := range []time.Duration{5 * time.Second, 10 * time.Second, 12 * time.Second, 12 * time.Second} {
		if got := b.Status().RetryIn; got != coolDown {
			t.Fatalf("trial %d: retry in %v, want %v", i, got, coolDown)
		}
		clock.Advance(coolDown - time.Millisecond)
		if err := call(b, nil); err == nil {
			t.Fatalf("trial %d: a call went through before the cool-down of %v passed", i, coolDown)
		}
		clock.Advance(time.Millisecond)
		p, err := b.Admit()
		if err != nil {
			t.Fatalf("trial %d: refused after the cool-down: %v", i, err)
		}
		p.Failed()
		if b.State() != BreakerOpen {
			t.Fatalf("trial %d: state %v after a failed trial, want open", i, b.State())
		}
	}
	if got := b.Status().Failures; got != 5 {
		t.Errorf("%d failures in a row, want 5", got)
	}
	clock.Advance(12 * time.Second)
	if err := call(b, nil); err != nil {
		t.Fatal(err)
	}
	call(b, errUnavailable)
	if got := b.Status(); got.State != BreakerOpen || got.RetryIn != 5*time.Second || got.Failures != 1 {
		t.Errorf("after closing and failing again: %+v, want open for 5s after 1 failure", got)
	}
}

// TestBreakerReleasedTrial: a trial that says nothing (its caller went away) lets the next
// call be the trial.
func TestBreakerReleasedTrial(t *testing.T) {
	clock := testutil.NewClock()
	b := newTestBreaker("", BreakerConfig{Failures: 1, CoolDown: time.Second}, clock)
	call(b, errUnavailable)
	clock.Advance(time.Second)
	p, err := b.Admit()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Admit(); err == nil {
		t.Fatal("a second trial was admitted")
	}
	p.Done(context.Canceled)
	if b.State() != BreakerHalfOpen || b.Status().Trial {
		t.Fatalf("status %+v after a released trial, want half-open with no trial", b.Status())
	}
	if err := call(b, nil); err != nil {
		t.Fatal(err)
	}
	if b.State() != BreakerClosed {
		t.Errorf("state %v, want closed", b.State())
	}
}

// TestBreakerStaleOutcomes: calls admitted before the circuit opened cannot close it (or count
// towards it) when they finish.
func TestBreakerStaleOutcomes(t *testing.T) {
	clock := testutil.NewClock()
	b := newTestBreaker("", BreakerConfig{Failures: 2}, clock)
	var slow []Permit
	for range 3 {
		p, _ := b.Admit()
		slow = append(slow, p)
	}
	call(b, errUnavailable)
	call(b, errUnavailable)
	slow[0].Succeeded()
	slow[1].Failed()
	if st := b.Status(); st.State != BreakerOpen || st.Failures != 2 {
		t.Fatalf("status %+v, want open after 2 failures", st)
	}
	clock.Advance(DefaultBreakerCoolDown)
	trial, err := b.Admit()
	if err != nil {
		t.Fatal(err)
	}
	slow[2].Succeeded() // an old call, not the trial
	if _, err := b.Admit(); err == nil || b.State() != BreakerHalfOpen {
		t.Fatalf("an old call's success changed the half-open state: %v %v", err, b.State())
	}
	trial.Succeeded()
	if b.State() != BreakerClosed {
		t.Errorf("state %v, want closed", b.State())
	}
}

func TestNilBreaker(t *testing.T) {
	b := NewBreaker("arr", "", BreakerConfig{Disable: true})
	if b != nil {
		t.Fatal("a disabled breaker must be nil")
	}
	for range 10 {
		if err := call(b, errUnavailable); err != nil {
			t.Fatal(err)
		}
	}
	if b.State() != BreakerClosed || b.Rejected() != 0 || b.Status() != (BreakerStatus{}) {
		t.Errorf("a nil breaker reports %v %d %+v", b.State(), b.Rejected(), b.Status())
	}
}

func TestBreakerStatusString(t *testing.T) {
	for _, tc := range []struct {
		st   BreakerStatus
		want string
	}{
		{BreakerStatus{}, "circuit closed"},
		{BreakerStatus{State: BreakerOpen, Failures: 7, RetryIn: 20 * time.Second}, "circuit open after 7 consecutive failures; retrying in 20s"},
		{BreakerStatus{State: BreakerOpen, Target: "http://b", Failures: 5, RetryIn: time.Nanosecond}, "circuit open for http://b after 5 consecutive failures; retrying in 1ms"},
		{BreakerStatus{State: BreakerHalfOpen, Failures: 5}, "circuit open after 5 consecutive failures; the next call is a trial"},
	} {
		if got := tc.st.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.st, got, tc.want)
		}
	}
	for s, want := range map[BreakerState]string{BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half-open", 9: "BreakerState(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", int(s), s.String(), want)
		}
	}
}

func TestBreakerConfigWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   BreakerConfig
		want BreakerConfig
		errs []string
	}{
		{"zero takes the defaults", BreakerConfig{}, BreakerConfig{Failures: 5, CoolDown: DefaultBreakerCoolDown, MaxCoolDown: DefaultBreakerMaxCoolDown}, nil},
		{"a long cool-down raises the maximum", BreakerConfig{CoolDown: 2 * time.Minute}, BreakerConfig{Failures: 5, CoolDown: 2 * time.Minute, MaxCoolDown: 2 * time.Minute}, nil},
		{"set values stay", BreakerConfig{Failures: 2, CoolDown: time.Second, MaxCoolDown: 8 * time.Second}, BreakerConfig{Failures: 2, CoolDown: time.Second, MaxCoolDown: 8 * time.Second}, nil},
		{"disabled is not checked", BreakerConfig{Disable: true, Failures: -1}, BreakerConfig{Disable: true, Failures: -1}, nil},
		{"negative values", BreakerConfig{Failures: -1, CoolDown: -time.Second, MaxCoolDown: -time.Second}, BreakerConfig{},
			[]string{"failures: -1 is negative", "coolDown: -1s is negative", "maxCoolDown: -1s is negative"}},
		{"maximum below the cool-down", BreakerConfig{CoolDown: 10 * time.Second, MaxCoolDown: 5 * time.Second}, BreakerConfig{},
			[]string{"maxCoolDown: 5s is shorter than coolDown (10s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.WithDefaults()
			if len(tc.errs) == 0 {
				if err != nil || got != tc.want {
					t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.errs)
			}
			for _, e := range tc.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q lacks %q", err, e)
				}
			}
		})
	}
}

// ExampleBreaker shows the calling pattern: Admit, send, report.
func ExampleBreaker() {
	b := NewBreaker("array1", "", BreakerConfig{Failures: 2, CoolDown: 5 * time.Second})
	send := func() error { return Errorf(ClassUnavailable, "connection refused") }
	for range 3 {
		p, err := b.Admit()
		if err != nil {
			fmt.Println(err)
			continue
		}
		p.Done(send())
	}
	fmt.Println(b.State())
	// Output:
	// backend "array1": circuit open after 2 consecutive failures; retrying in 5s
	// open
}
