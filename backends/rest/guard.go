package rest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
)

// The guards of a REST backend: a circuit breaker per URL and one retry budget.
//
// Each URL has its own breaker (backends.Breaker). An attempt whose outcome is of a transient
// class (unavailable or deadline: no connection, no answer in time, 429, 502, 503, 504, or a
// code saying so) counts as a failure of its URL; any other answer as a success; an attempt
// cut short by the caller as neither. While a URL's circuit is open, attempts skip it for
// the next URL, as if it had refused the connection; when every URL's circuit is open, the
// call fails fast with ClassUnavailable without sending anything, and a retry is not made.
// Once a cool-down has passed, one call is let through to the URL as a trial.
//
// The budget (backends.RetryBudget) is shared by every call of the backend: each call that
// is sent counts once, and each retry must fit in it. When it does not, the retries end
// and the caller gets the last attempt's error, saying that the budget is spent. Failing
// over to a URL the call has not tried yet is not counted as a retry: it adds no load to a
// URL that is failing. So a backend with one URL sends at most calls × (1 + ratio) +
// minPerSecond × window requests per window.
//
// Ready uses neither: it asks each URL once and reports what it finds, so /readyz says why
// a backend is failing while its circuits are open.

// guard makes the breakers and the budget of b from its configuration, reading the time
// from now (nil: time.Now).
func (b *Backend) guard(now func() time.Time) {
	if !b.cfg.Breaker.Disable {
		b.breakers = make([]*backends.Breaker, len(b.urls))
		for i, u := range b.urls {
			b.breakers[i] = backends.NewBreaker(b.name, u.display, b.cfg.Breaker)
			if now != nil {
				b.breakers[i].SetClock(now)
			}
		}
	}
	if !b.cfg.Budget.Disable {
		b.budget = backends.NewRetryBudget(b.cfg.Budget.Ratio, b.cfg.Budget.MinPerSecond, b.cfg.Budget.Window)
		if now != nil {
			b.budget.SetClock(now)
		}
	}
}

// Breakers returns the circuit breakers of the backend's URLs, in the order of
// Config.URLs, for metrics and readiness; nil when they are disabled. The slice is a copy;
// the breakers are the backend's own.
func (b *Backend) Breakers() []*backends.Breaker { return slices.Clone(b.breakers) }

// RetryBudget returns the backend's retry budget, for metrics (its Refused count); nil when
// it is disabled.
func (b *Backend) RetryBudget() *backends.RetryBudget { return b.budget }

var (
	_ backends.BreakerReporter = (*Backend)(nil)
	_ backends.BudgetReporter  = (*Backend)(nil)
)

// breaker returns the breaker of URL i, nil when breakers are disabled.
func (b *Backend) breaker(i int) *backends.Breaker {
	if b.breakers == nil {
		return nil
	}
	return b.breakers[i]
}

// admit picks the URL of the next attempt: the first, from the URL at index from on (and
// around), whose circuit lets a call through. It returns its index and the permit on which
// the attempt's outcome is reported; when every circuit is open, a message saying so and
// when they will be retried. Ready's attempts (failoverOnly) are admitted to the URL at
// from without asking.
func (c *call) admit(from int) (int, backends.Permit, string) {
	if c.policy.failoverOnly {
		return from, backends.Permit{}, ""
	}
	n := len(c.b.urls)
	var open []string
	for i := range n {
		idx := (from + i) % n
		p, err := c.b.breaker(idx).Admit()
		if err == nil {
			return idx, p, ""
		}
		open = append(open, c.b.breaker(idx).Status().String())
	}
	return 0, backends.Permit{}, strings.Join(open, "; ")
}

// hold keeps p as the permit of the attempt about to be sent to URL idx.
func (c *call) hold(idx int, p backends.Permit) {
	c.next, c.permit, c.holding = idx, p, true
}

// settle reports the outcome of the attempt just made to its URL's breaker: a transient
// class is a failure, any other class or a 200 a success; when the caller's context is done
// the attempt says nothing about the URL.
func (c *call) settle(callerDone bool, ok bool) {
	if !c.holding {
		return
	}
	c.holding = false
	switch {
	case callerDone:
		c.permit.Release()
	case ok, !c.lastClass.Transient():
		c.permit.Succeeded()
	default:
		c.permit.Failed()
	}
}

// release gives back the permit of an attempt that was never sent (the caller went away
// during the backoff, say).
func (c *call) release() {
	if c.holding {
		c.holding = false
		c.permit.Release()
	}
}

// retryFits reports whether a retry to URL idx fits in the budget; a first attempt at a URL
// (failover) always fits. Ready's retries are failovers only and are not counted.
func (c *call) retryFits(idx int) bool {
	if c.policy.failoverOnly || !c.tried[idx] {
		return true
	}
	return c.b.budget.TryRetry()
}

// budgetSpent says why a retry was not made, for finalError.
func (c *call) budgetSpent() string {
	bc := c.b.cfg.Budget
	return fmt.Sprintf("the retry budget is spent (backends.%s.retryBudget: retries may add %g%% to the calls of the last %v, plus %g a second), so as not to add to the load of an appliance that is failing",
		c.b.name, bc.Ratio*100, bc.Window, bc.MinPerSecond)
}

// eachPrefixed returns the errors joined in err (or err itself), each with prefix before it.
func eachPrefixed(prefix string, err error) []error {
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			errs = append(errs, fmt.Errorf("%s%w", prefix, e))
		}
		return errs
	}
	return []error{fmt.Errorf("%s%w", prefix, err)}
}
