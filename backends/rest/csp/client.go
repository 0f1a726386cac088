package csp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest"
)

// request is one CSP call made for a CSI RPC.
type request struct {
	rpc    string // the CSI RPC it serves, for classification and messages
	method string
	path   string // below /containers/v1, e.g. "/volumes/ID"
	query  url.Values
	body   any // sent as JSON; nil: no body
	// idempotent requests are retried, within the call's deadline, when the CSP is rate
	// limited or unavailable (429, 502, 503, 504, no connection). A POST that creates is
	// never retried blindly: its RPC looks the name up again instead.
	idempotent bool
}

// do sends r with the session's token and decodes a 2xx answer's body into out (when out is
// not nil). It returns every answer it got, 2xx or not, for the RPC to judge; the error is
// for no answer at all (the CSP unreachable, the deadline passed), for credentials the CSP
// keeps refusing, and for a 2xx answer that is not the JSON expected. On 401 it logs in once
// more and resends once: never a loop.
func (b *Backend) do(ctx context.Context, r request, out any) (answer, error) {
	tok, err := b.session.current(ctx)
	if err != nil {
		return answer{}, err
	}
	relogged := false
	for attempt := 1; ; attempt++ {
		a, err := b.send(ctx, r, tok, out)
		if err != nil {
			if r.idempotent && a.cause != nil && rest.RetryableTransport(a.cause) && attempt < defaultMaxAttempts && b.retryAfter(ctx, attempt, nil) {
				continue
			}
			return a, err
		}
		if a.status == http.StatusUnauthorized && !relogged {
			relogged = true
			if tok, err = b.session.renew(ctx, tok); err != nil {
				return answer{}, err
			}
			continue
		}
		if r.idempotent && rest.RetryableStatus(a.status) && attempt < defaultMaxAttempts && b.retryAfter(ctx, attempt, a.resp) {
			continue
		}
		return a, nil
	}
}

// send makes one HTTP request. tok is the session token ("" for the login itself).
func (b *Backend) send(ctx context.Context, r request, tok string, out any) (answer, error) {
	a := answer{method: r.method, path: containersPath + r.path}
	if err := ctx.Err(); err != nil {
		return a, b.contextError(r.rpc, err)
	}
	var body io.Reader
	if r.body != nil {
		j, err := json.Marshal(r.body)
		if err != nil {
			return a, b.errorf(backends.ClassInternal, r.rpc, "encoding the request: %v", err)
		}
		body = bytes.NewReader(j)
	}
	target := b.cfg.URL + a.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.RequestTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return a, b.errorf(backends.ClassInternal, r.rpc, "building %s %s: %v", r.method, a.path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("x-auth-token", tok)
	}
	if b.cfg.ArrayIP != "" {
		req.Header.Set("x-array-ip", b.cfg.ArrayIP)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return a, b.contextError(r.rpc, ctxErr)
		}
		a.cause = err
		return a, b.errorf(backends.ClassUnavailable, r.rpc, "%s %s: cannot reach the CSP at %s: %s",
			r.method, a.path, b.cfg.URL, rest.Clean(err.Error(), maxSaid))
	}
	defer resp.Body.Close()
	a.status, a.contentType, a.resp = resp.StatusCode, resp.Header.Get("Content-Type"), resp
	a.body, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return a, b.contextError(r.rpc, ctxErr)
		}
		return a, b.errorf(backends.ClassUnavailable, r.rpc, "%s %s: the answer broke off: %s", r.method, a.path, rest.Clean(err.Error(), maxSaid))
	}
	if a.status/100 == 2 && out != nil && a.status != http.StatusNoContent {
		if err := json.Unmarshal(a.body, out); err != nil {
			return a, b.errorf(backends.ClassInternal, r.rpc, "%s %s answered %d with a body that is not the JSON expected: %s",
				r.method, a.path, a.status, rest.Clean(err.Error(), maxSaid))
		}
	}
	return a, nil
}

// contextError classifies the end of the caller's context.
func (b *Backend) contextError(rpc string, err error) *backends.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &backends.Error{Class: backends.ClassDeadline, Message: fmt.Sprintf("backend %q: %s: the deadline passed before the CSP answered", b.name, rpc), Cause: err}
	}
	return &backends.Error{Class: backends.ClassCanceled, Message: fmt.Sprintf("backend %q: %s: the caller went away", b.name, rpc), Cause: err}
}

// retryAfter waits before attempt+1 as the rest backend does (rest.Backoff: exponential with
// jitter, at least the answer's Retry-After), and reports whether to try again: not when the
// CSP asks for longer than the backoff's bound, nor when the wait would outlast the call's
// deadline (then the last answer stands, as UNAVAILABLE: a retry that cannot finish in time
// is not worth starting).
func (b *Backend) retryAfter(ctx context.Context, attempt int, resp *http.Response) bool {
	d, ok := rest.Backoff(defaultMinBackoff, defaultMaxBackoff, attempt, resp)
	if !ok {
		return false
	}
	if deadline, has := ctx.Deadline(); has && time.Until(deadline) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
