package backends

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a retry budget (BudgetConfig's zero values).
const (
	DefaultBudgetRatio        = 0.2
	DefaultBudgetMinPerSecond = 3
	DefaultBudgetWindow       = 10 * time.Second
)

// budgetBuckets is how many counters a budget's window is cut into: the window slides by a
// tenth of its length at a time.
const budgetBuckets = 10

// BudgetConfig is the retry budget of one backend (backends.NAME.retryBudget in the gateway's
// configuration; the field comments name the keys). Zero values take the defaults above.
type BudgetConfig struct {
	// Ratio (ratio) is how many retries the backend may send per call, over the window:
	// 0.2 lets the retries add at most 20 % to the calls.
	Ratio float64
	// MinPerSecond (minPerSecond) is a reserve of retries per second of the window, on top
	// of Ratio, so that a backend with few calls can still retry.
	MinPerSecond float64
	// Window (window) is how far back the budget counts calls and retries; at least 1s.
	Window time.Duration
	// Disable (disable) turns the budget off: every retry the retry policy allows is sent.
	// The other fields are then ignored.
	Disable bool
}

// WithDefaults fills the zero fields of c and checks the result. Each error names its key
// relative to the retryBudget block ("ratio: ..."), for the caller to prefix.
func (c BudgetConfig) WithDefaults() (BudgetConfig, error) {
	if c.Disable {
		return c, nil
	}
	if c.Ratio == 0 {
		c.Ratio = DefaultBudgetRatio
	}
	if c.MinPerSecond == 0 {
		c.MinPerSecond = DefaultBudgetMinPerSecond
	}
	if c.Window == 0 {
		c.Window = DefaultBudgetWindow
	}
	var errs []error
	if c.Ratio < 0 || math.IsNaN(c.Ratio) || math.IsInf(c.Ratio, 0) {
		errs = append(errs, fmt.Errorf("ratio: %v is not a fraction of the calls; use 0.2 to let retries add at most 20 %% to them", c.Ratio))
	}
	if c.MinPerSecond < 0 || math.IsNaN(c.MinPerSecond) || math.IsInf(c.MinPerSecond, 0) {
		errs = append(errs, fmt.Errorf("minPerSecond: %v is not a number of retries per second, such as 3", c.MinPerSecond))
	}
	if c.Window < time.Second {
		errs = append(errs, fmt.Errorf("window: %v is shorter than 1s", c.Window))
	}
	return c, errors.Join(errs...)
}

// RetryBudget limits the retries a backend sends to a fraction of its recent calls, so that
// when the backend fails every call, retrying does not multiply the load on it: over the
// sliding window, retries may number at most ratio × calls + minPerSecond × window.
//
// Callers record every call that is sent (RecordCall) and ask before every retry (TryRetry).
// The window is kept as ten bucketed counters, so it slides in tenths of its length; a call
// or retry counts until between nine and ten tenths of the window have passed. The reserve
// (minPerSecond × window) is available at once, so a quiet backend can retry a burst of
// that many.
//
// A RetryBudget is safe for concurrent use. Every method is O(1) under one short lock, and
// it runs no goroutine. A nil *RetryBudget allows every retry.
type RetryBudget struct {
	ratio   float64
	reserve float64
	width   time.Duration // of a bucket

	mu         sync.Mutex
	now        func() time.Time
	start      time.Time
	head       int64 // number of the current bucket, counted from start
	calls      [budgetBuckets]int64
	retries    [budgetBuckets]int64
	sumCalls   int64
	sumRetries int64

	refused atomic.Uint64
}

// NewRetryBudget returns a budget that allows, over the last window, ratio retries per call
// plus minPerSecond retries per second of the window. A negative or NaN ratio or minimum
// counts as 0; a window of zero or less is DefaultBudgetWindow.
func NewRetryBudget(ratio float64, minPerSecond float64, window time.Duration) *RetryBudget {
	if !(ratio >= 0) || math.IsInf(ratio, 0) {
		ratio = 0
	}
	if !(minPerSecond >= 0) || math.IsInf(minPerSecond, 0) {
		minPerSecond = 0
	}
	if window <= 0 {
		window = DefaultBudgetWindow
	}
	b := &RetryBudget{
		ratio:   ratio,
		reserve: minPerSecond * window.Seconds(),
		width:   max(window/budgetBuckets, 1),
		now:     time.Now,
	}
	b.start = b.now()
	return b
}

// SetClock makes b read the time from now instead of time.Now, and forgets what b has
// counted; for tests. It is safe to call at any time.
func (b *RetryBudget) SetClock(now func() time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now, b.start, b.head = now, now(), 0
	b.calls, b.retries = [budgetBuckets]int64{}, [budgetBuckets]int64{}
	b.sumCalls, b.sumRetries = 0, 0
}

// RecordCall counts one call sent to the backend (its first attempt; retries are counted by
// TryRetry).
func (b *RetryBudget) RecordCall() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	slot := b.advance()
	b.calls[slot]++
	b.sumCalls++
}

// TryRetry reports whether one more retry fits in the budget, and if so counts it. A false
// answer is counted in Refused; the caller must then not retry.
func (b *RetryBudget) TryRetry() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	slot := b.advance()
	// The epsilon keeps 0.2 × 10 calls at two retries despite binary fractions.
	if float64(b.sumRetries+1) > b.ratio*float64(b.sumCalls)+b.reserve+1e-9 {
		b.refused.Add(1)
		return false
	}
	b.retries[slot]++
	b.sumRetries++
	return true
}

// Refused returns how many retries the budget has refused since it was made, for metrics.
func (b *RetryBudget) Refused() uint64 {
	if b == nil {
		return 0
	}
	return b.refused.Load()
}

// advance moves the window to now, emptying the buckets that left it, and returns the slot
// of the current bucket. b.mu must be held. A clock that goes backwards (only a test's can;
// time.Now is monotonic here) leaves the window where it is.
func (b *RetryBudget) advance() int {
	cur := int64(b.now().Sub(b.start) / b.width)
	switch {
	case cur <= b.head:
	case cur-b.head >= budgetBuckets:
		b.calls, b.retries = [budgetBuckets]int64{}, [budgetBuckets]int64{}
		b.sumCalls, b.sumRetries = 0, 0
		b.head = cur
	default:
		for b.head < cur {
			b.head++
			slot := b.head % budgetBuckets
			b.sumCalls -= b.calls[slot]
			b.sumRetries -= b.retries[slot]
			b.calls[slot], b.retries[slot] = 0, 0
		}
	}
	return int(b.head % budgetBuckets)
}
