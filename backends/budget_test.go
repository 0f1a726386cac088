package backends

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestRetryBudgetArithmetic runs steps on a budget with a fake clock: at each step's time
// (from the start) it records calls, then asks for retries, and checks how many were allowed.
func TestRetryBudgetArithmetic(t *testing.T) {
	type step struct {
		at             time.Duration
		calls, retries int
		allowed        int
	}
	for _, tc := range []struct {
		name        string
		ratio, min  float64
		window      time.Duration
		steps       []step
		wantRefused uint64
	}{
		{"no calls, no reserve: no retry", 0.2, 0, 10 * time.Second,
			[]step{{0, 0, 3, 0}}, 3},
		{"a fifth of the calls", 0.2, 0, 10 * time.Second,
			[]step{{0, 10, 3, 2}, {time.Second, 5, 3, 1}}, 3},
		{"reserve of minPerSecond × window, at once", 0.2, 3, 10 * time.Second,
			[]step{{0, 0, 31, 30}}, 1},
		{"reserve and ratio add up", 0.2, 3, 10 * time.Second,
			[]step{{0, 50, 45, 40}}, 5},
		{"calls count until the window has passed", 0.2, 0, 10 * time.Second,
			[]step{{0, 10, 0, 0}, {9*time.Second + 999*time.Millisecond, 0, 3, 2}}, 1},
		{"calls and retries leave the window together", 0.2, 0, 10 * time.Second,
			[]step{{0, 10, 2, 2}, {10 * time.Second, 0, 1, 0}, {10 * time.Second, 10, 3, 2}}, 2},
		{"the window slides by buckets", 0.5, 0, 10 * time.Second,
			[]step{{0, 10, 5, 5}, {5 * time.Second, 10, 6, 5}, {10 * time.Second, 0, 1, 0}, {11 * time.Second, 2, 1, 1}, {15 * time.Second, 0, 1, 0}}, 3},
		{"a long quiet spell empties the window", 0.2, 1, 10 * time.Second,
			[]step{{0, 0, 11, 10}, {time.Hour, 0, 11, 10}}, 2},
		{"a short window refills its reserve sooner", 0, 3, time.Second,
			[]step{{0, 0, 4, 3}, {time.Second, 0, 4, 3}}, 2},
		{"ratio above 1 allows more retries than calls", 2, 0, 10 * time.Second,
			[]step{{0, 3, 7, 6}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testutil.NewClock()
			start := clock.Now()
			b := NewRetryBudget(tc.ratio, tc.min, tc.window)
			b.SetClock(clock.Now)
			for i, s := range tc.steps {
				clock.Advance(start.Add(s.at).Sub(clock.Now()))
				for range s.calls {
					b.RecordCall()
				}
				allowed := 0
				for range s.retries {
					if b.TryRetry() {
						allowed++
					}
				}
				if allowed != s.allowed {
					t.Errorf("step %d (at %v): %d of %d retries allowed, want %d", i, s.at, allowed, s.retries, s.allowed)
				}
			}
			if got := b.Refused(); got != tc.wantRefused {
				t.Errorf("Refused() = %d, want %d", got, tc.wantRefused)
			}
		})
	}
}

// TestRetryBudgetConcurrent: many goroutines record calls and then ask for retries at once;
// exactly what the budget holds is allowed, and the rest is counted as refused.
func TestRetryBudgetConcurrent(t *testing.T) {
	clock := testutil.NewClock()
	b := NewRetryBudget(0.2, 3, 10*time.Second)
	b.SetClock(clock.Now)
	const workers, callsEach, retriesEach = 50, 20, 10
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range callsEach {
				b.RecordCall()
			}
		})
	}
	wg.Wait()
	var allowed atomic.Int64
	for range workers {
		wg.Go(func() {
			for range retriesEach {
				if b.TryRetry() {
					allowed.Add(1)
				}
				_ = b.Refused()
			}
		})
	}
	wg.Wait()
	want := int64(0.2*workers*callsEach + 3*10) // 200 + 30
	if allowed.Load() != want {
		t.Errorf("%d retries allowed, want %d", allowed.Load(), want)
	}
	if got := b.Refused(); got != uint64(workers*retriesEach-want) {
		t.Errorf("Refused() = %d, want %d", got, workers*retriesEach-want)
	}
}

// TestRetryBudgetConcurrentWithTime races calls, retries and a moving clock, for -race; the
// budget holds at every moment: allowed retries never exceed what the whole run could grant.
func TestRetryBudgetConcurrentWithTime(t *testing.T) {
	clock := testutil.NewClock()
	b := NewRetryBudget(0.2, 3, 10*time.Second)
	b.SetClock(clock.Now)
	var wg sync.WaitGroup
	var calls, allowed atomic.Int64
	for range 20 {
		wg.Go(func() {
			for range 100 {
				b.RecordCall()
				calls.Add(1)
				if b.TryRetry() {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			clock.Advance(10 * time.Millisecond) // one second in all: within one window
		}
	})
	wg.Wait()
	if limit := int64(0.2*float64(calls.Load())) + 30; allowed.Load() > limit {
		t.Errorf("%d retries allowed for %d calls, more than %d", allowed.Load(), calls.Load(), limit)
	}
	if allowed.Load()+int64(b.Refused()) != calls.Load() {
		t.Errorf("allowed %d + refused %d != asked %d", allowed.Load(), b.Refused(), calls.Load())
	}
}

func TestRetryBudgetNilAllowsEverything(t *testing.T) {
	var b *RetryBudget
	b.RecordCall()
	if !b.TryRetry() || b.Refused() != 0 {
		t.Error("a nil budget must allow every retry and refuse none")
	}
}

func TestNewRetryBudgetClampsArguments(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ratio, min float64
		window     time.Duration
		allowed    int // of 100 retries after 10 calls
	}{
		{"negative ratio is 0", -1, 1, 10 * time.Second, 10},
		{"NaN minimum is 0", 0.5, math.NaN(), 10 * time.Second, 5},
		{"infinite ratio is 0", math.Inf(1), 0, 10 * time.Second, 0},
		{"no window is the default", 0, 1, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewRetryBudget(tc.ratio, tc.min, tc.window)
			b.SetClock(testutil.NewClock().Now)
			for range 10 {
				b.RecordCall()
			}
			allowed := 0
			for range 100 {
				if b.TryRetry() {
					allowed++
				}
			}
			if allowed != tc.allowed {
				t.Errorf("%d retries allowed, want %d", allowed, tc.allowed)
			}
		})
	}
}

func TestBudgetConfigWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   BudgetConfig
		want BudgetConfig
		errs []string
	}{
		{"zero takes the defaults", BudgetConfig{}, BudgetConfig{Ratio: 0.2, MinPerSecond: 3, Window: 10 * time.Second}, nil},
		{"set values stay", BudgetConfig{Ratio: 0.5, MinPerSecond: 1, Window: time.Minute}, BudgetConfig{Ratio: 0.5, MinPerSecond: 1, Window: time.Minute}, nil},
		{"disabled is not checked", BudgetConfig{Disable: true, Ratio: -1}, BudgetConfig{Disable: true, Ratio: -1}, nil},
		{"bad values", BudgetConfig{Ratio: -0.1, MinPerSecond: math.Inf(1), Window: time.Millisecond}, BudgetConfig{},
			[]string{"ratio: -0.1 is not a fraction of the calls", "minPerSecond: +Inf is not a number", "window: 1ms is shorter than 1s"}},
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
