package rest

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The retry policy of the REST backend, for go-retryablehttp's CheckRetry and Backoff.
//
// Every call is a POST, which HTTP does not consider safe to repeat, and go-retryablehttp's
// default policy retries POSTs anyway. Here retrying is safe for another reason: every CSI
// RPC is idempotent by the CSI specification (a CreateVolume repeated with the same name
// returns the same volume; a repeated DeleteVolume of a deleted volume succeeds), so an
// attempt that may or may not have reached the appliance can be sent again. Only the
// methods of CSI and csi-addons services, all idempotent likewise, are sent by this
// backend.
//
// What is retried is what may succeed unchanged: transport failures (connection refused or
// reset, DNS, EOF, timeouts), 429 Too Many Requests, 502, 503 and 504. Never a certificate
// failure (retrying will not change the certificate), never another 4xx (the request is
// wrong and stays wrong), never 500 or 501 (the appliance said the failure is final), and
// never after the caller's context is done.

// RetryableStatus reports whether an HTTP answer with this status may be retried.
func RetryableStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// RetryableTransport reports whether an attempt that failed without an answer may be
// retried: everything but TLS failures that only a change of configuration can fix.
func RetryableTransport(err error) bool {
	switch transportKindOf(err) {
	case kindCert, kindCertRefused, kindNotTLS, kindCredentials:
		return false
	}
	return true
}

// failover reports whether the next attempt should go to the next URL: when this one could
// not be reached at all. A URL that answered, even with 503, stays in use until its circuit
// opens (guard.go).
func failover(err error) bool {
	return err != nil && RetryableTransport(err)
}

// Backoff returns how long to wait after the given number of attempts (1 or more) before
// the next one: exponential from lo, doubled per attempt, capped at hi, with jitter
// (uniform in the upper half of the interval, and never below lo), so that gateways
// retrying together spread out. A Retry-After of the answer is honoured: the wait is at
// least that long. ok is false when Retry-After asks for longer than hi: the caller
// should stop retrying rather than wait that long or come back too early.
func Backoff(lo, hi time.Duration, attempts int, resp *http.Response) (wait time.Duration, ok bool) {
	ceiling := lo
	for i := 1; i < attempts && ceiling < hi; i++ {
		if ceiling > hi/2 {
			ceiling = hi
			break
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, hi)
	wait = max(ceiling/2+time.Duration(rand.Int64N(int64(ceiling-ceiling/2)+1)), lo)
	if after, has := retryAfter(resp, time.Now()); has {
		if after > hi {
			return after, false
		}
		wait = max(wait, after)
	}
	return wait, true
}

// retryAfter parses the Retry-After header of resp, in seconds or as an HTTP date
// relative to now. A date in the past means no wait; a value that is neither is ignored.
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(24*time.Hour/time.Second) {
			secs = int64(24 * time.Hour / time.Second) // anything this long is "too long"
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
