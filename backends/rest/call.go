package rest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/csi-gateway/csi-gateway/backends"
)

// attemptPolicy is how one call is attempted.
type attemptPolicy struct {
	maxAttempts int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	// failoverOnly retries only failures to reach a URL, at once, on the next URL: for
	// Ready, which asks whether any URL answers now.
	failoverOnly bool
}

// call is the state of one call across its attempts. go-retryablehttp runs the hooks of
// a call one after another on the caller's goroutine, so it needs no lock.
type call struct {
	b        *Backend
	m        *method
	policy   attemptPolicy
	timeout  time.Duration // per attempt, when the caller's context has no deadline; else 0
	next     int           // index of the URL of the next attempt
	used     int           // index of the URL of the last attempt
	attempts int
	wait     time.Duration // before the next attempt, decided by checkRetry
	stopped  string        // why retrying stopped before maxAttempts, for the message
	tried    []bool        // by URL index: whether an attempt of this call went there

	// The breaker's permit for the attempt about to be sent (or in flight), while holding.
	permit  backends.Permit
	holding bool

	// The last failed attempt, when failed: its class, its message without the
	// `backend "NAME": METHOD: ` prefix, and the transport error if it got no answer.
	failed    bool
	lastClass backends.Class
	lastMsg   string
	lastCause error
}

// post sends body to m on the appliance, retrying and failing over as the policy says, and
// returns the body of a 200 answer (at most maxSuccessBody bytes). Any other outcome is a
// classified *backends.Error.
func (b *Backend) post(ctx context.Context, m *method, body []byte, policy attemptPolicy) ([]byte, error) {
	c := &call{b: b, m: m, policy: policy, tried: make([]bool, len(b.urls))}
	first, permit, open := c.admit(int(b.preferred.Load()) % len(b.urls))
	if open != "" {
		return nil, newError(backends.ClassUnavailable, b.name, m.name, open)
	}
	c.hold(first, permit)
	defer c.release()
	if !policy.failoverOnly {
		b.budget.RecordCall()
	}
	client := b.client
	if _, ok := ctx.Deadline(); !ok {
		client, c.timeout = b.timed, b.cfg.RequestTimeout
	}
	rc := &retryablehttp.Client{
		HTTPClient:     client,
		Logger:         nil, // it would log URLs; the gateway logs each call once, elsewhere
		RetryMax:       policy.maxAttempts - 1,
		RetryWaitMin:   policy.minBackoff,
		RetryWaitMax:   policy.maxBackoff,
		CheckRetry:     c.checkRetry,
		Backoff:        c.backoff,
		PrepareRetry:   c.prepareRetry,
		RequestLogHook: c.beforeAttempt,
		ErrorHandler:   retryablehttp.PassthroughErrorHandler,
	}
	req, err := retryablehttp.NewRequestWithContext(withCall(ctx, c), http.MethodPost, b.urls[c.next].endpoint(m.path).String(), body)
	if err != nil {
		return nil, newError(backends.ClassInternal, b.name, m.name, "cannot build the HTTP request") // the URL was validated; cannot happen
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	c.setTimeout(ctx, req.Header)

	resp, err := rc.Do(req)
	if resp != nil {
		defer resp.Body.Close()
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, c.contextError(ctx.Err())
	case err != nil && !c.failed: // not an attempt's failure but the library's own (cannot rewind the body)
		return nil, newError(backends.ClassUnavailable, b.name, m.name, "cannot send the request: "+Clean(err.Error(), maxSaid))
	case err != nil, resp.StatusCode != http.StatusOK:
		return nil, c.finalError()
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxSuccessBody+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, c.contextError(ctx.Err())
	case err != nil:
		return nil, transportError(b.name, m.name, b.urls[c.used].display, err, c.timeout)
	case len(out) > maxSuccessBody:
		return nil, newError(backends.ClassInternal, b.name, m.name,
			fmt.Sprintf("the appliance answered with a body larger than %d MiB", maxSuccessBody>>20))
	}
	return out, nil
}

// beforeAttempt runs before every attempt: it counts it.
func (c *call) beforeAttempt(_ retryablehttp.Logger, req *http.Request, _ int) {
	c.attempts++
	c.used = c.next
	c.tried[c.used] = true
	backends.CallInfoFrom(req.Context()).AddAttempt()
}

// checkRetry is the CheckRetry of the call: it classifies the attempt, remembers the URL
// that answered or moves on from the one that did not, and decides whether and after how
// long to try again. It stops when the caller's context is done, when the policy says the
// failure is final, when the attempts are used up, when the wait would pass the
// caller's deadline or be longer than the policy's maximum, when every URL's circuit is
// open, and when the retry budget is spent (guard.go). It reports each attempt's outcome
// to its URL's breaker.
func (c *call) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		c.settle(true, false)
		return false, ctx.Err()
	}
	var retry bool
	switch {
	case err != nil:
		c.failed, c.lastCause = true, withoutURL(err)
		c.lastClass, c.lastMsg = describeTransport(c.b.name, c.b.urls[c.used].display, err, c.timeout)
		retry = RetryableTransport(err)
		if failover(err) {
			c.next = (c.used + 1) % len(c.b.urls)
		}
	case resp.StatusCode == http.StatusOK:
		c.settle(false, true)
		c.b.preferred.Store(int32(c.used))
		return false, nil
	default:
		c.b.preferred.Store(int32(c.used))
		// Read the error body now, so that whatever happens next, the message can say
		// what the appliance said; the library drains and closes the replacement.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		// The request's secrets go before anything parses, cleans or cuts the appliance's
		// words (the gateway scrubs the message again, in every form a secret takes).
		body = []byte(backends.CallInfoFrom(ctx).Scrub(string(body)))
		c.failed, c.lastCause = true, nil
		c.lastClass, c.lastMsg = describeAnswer(c.b.name, c.m.path, c.b.urls[c.used].display, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		retry = RetryableStatus(resp.StatusCode) && !c.policy.failoverOnly
	}
	c.settle(false, false)
	if !retry || c.attempts >= c.policy.maxAttempts {
		return false, nil
	}
	if c.policy.failoverOnly {
		c.wait = 0
		return true, nil
	}
	wait, ok := Backoff(c.policy.minBackoff, c.policy.maxBackoff, c.attempts, resp)
	if !ok {
		c.stopped = fmt.Sprintf("the appliance asked to retry after %v, longer than backends.%s.retry.maxBackoff (%v)",
			wait.Round(time.Second), c.b.name, c.policy.maxBackoff)
		return false, nil
	}
	if dl, has := ctx.Deadline(); has && time.Now().Add(wait).After(dl) {
		c.stopped = fmt.Sprintf("the next retry, in %v, would pass the caller's deadline", wait.Round(time.Millisecond))
		return false, nil
	}
	next, permit, open := c.admit(c.next)
	if open != "" {
		c.stopped = open
		return false, nil
	}
	if !c.retryFits(next) {
		permit.Release()
		c.stopped = c.budgetSpent()
		return false, nil
	}
	c.hold(next, permit)
	c.wait = wait
	return true, nil
}

// backoff is the Backoff of the call: the wait checkRetry decided on.
func (c *call) backoff(_, _ time.Duration, _ int, _ *http.Response) time.Duration { return c.wait }

// prepareRetry points the next attempt at the URL checkRetry chose and refreshes its
// Connect-Timeout-Ms. The header map is copied: the previous attempt's request shares it.
func (c *call) prepareRetry(req *http.Request) error {
	req.Header = req.Header.Clone()
	c.setTimeout(req.Context(), req.Header)
	if c.next != c.used {
		u := c.b.urls[c.next].endpoint(c.m.path)
		req.URL, req.Host = u, u.Host
	}
	return nil
}

// setTimeout tells the appliance how long the gateway will wait, as Connect-Timeout-Ms:
// what is left of the caller's deadline, or the per-attempt timeout.
func (c *call) setTimeout(ctx context.Context, h http.Header) {
	left := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	ms := min(max(left.Milliseconds(), 1), 9_999_999_999) // the protocol's 10 digits
	h.Set("Connect-Timeout-Ms", strconv.FormatInt(ms, 10))
}

// finalError is the last attempt's error, with how the retries ended.
func (c *call) finalError() *backends.Error {
	msg := c.lastMsg
	switch {
	case c.stopped != "":
		msg = fmt.Sprintf("%s; gave up after %s: %s", msg, attemptsText(c.attempts), c.stopped)
	case c.attempts > 1:
		msg = fmt.Sprintf("%s; gave up after %s", msg, attemptsText(c.attempts))
	}
	e := newError(c.lastClass, c.b.name, c.m.name, msg)
	e.Cause = c.lastCause
	return e
}

// contextError reports the end of the caller's context: canceled or deadline, with the last
// failed attempt, if any, for context.
func (c *call) contextError(err error) *backends.Error {
	class, what := backends.ClassCanceled, "the caller canceled the call"
	if errors.Is(err, context.DeadlineExceeded) {
		class, what = backends.ClassDeadline, "the caller's deadline passed"
	}
	msg := fmt.Sprintf("%s after %s", what, attemptsText(c.attempts))
	if c.attempts == 0 {
		msg = what + " before it was sent"
	}
	if c.failed {
		msg += "; the last failed attempt: " + c.lastMsg
	}
	e := newError(class, c.b.name, c.m.name, msg)
	e.Cause = err
	return e
}

func attemptsText(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}
