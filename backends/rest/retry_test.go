package rest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
)

func TestRetryableStatus(t *testing.T) {
	for status := 100; status < 600; status++ {
		want := status == 429 || status == 502 || status == 503 || status == 504
		if got := RetryableStatus(status); got != want {
			t.Errorf("retryableStatus(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, 5 * time.Second
	for attempts := 1; attempts <= 70; attempts++ {
		ceiling := hi
		if attempts <= 6 {
			ceiling = lo << (attempts - 1) // 100ms, 200ms, ... 3.2s; then 5s
		}
		for range 200 {
			wait, ok := Backoff(lo, hi, attempts, nil)
			if !ok || wait < max(lo, ceiling/2) || wait > ceiling {
				t.Fatalf("backoff after %d attempts = %v, %v; want %v..%v", attempts, wait, ok, max(lo, ceiling/2), ceiling)
			}
		}
	}
	if wait, ok := Backoff(time.Second, time.Second, 3, nil); !ok || wait != time.Second {
		t.Errorf("backoff with min = max = 1s: %v, %v", wait, ok)
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	resp := func(v string) *http.Response {
		return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}}
	}
	date := time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		header  string
		atLeast time.Duration
		ok      bool
	}{
		{"2", 2 * time.Second, true},
		{date, time.Second, true}, // whole seconds on the wire: at least 2s, allow for the clock
		{"0", 0, true},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0, true}, // in the past: no extra wait
		{"soon", 0, true},
		{"-3", 0, true},
		{"60", 60 * time.Second, false}, // longer than max: stop
		{"99999999999999999999", 0, true},
		{"9223372036", 24 * time.Hour, false},
	}
	for _, tt := range tests {
		wait, ok := Backoff(10*time.Millisecond, 5*time.Second, 1, resp(tt.header))
		if ok != tt.ok || wait < tt.atLeast || wait < 10*time.Millisecond {
			t.Errorf("Retry-After %q: %v, %v; want at least %v, %v", tt.header, wait, ok, tt.atLeast, tt.ok)
		}
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
		ok     bool
	}{
		{"", 0, false},
		{"120", 120 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"Tue, 03 Nov 2026 10:00:30 GMT", 30 * time.Second, true},
		{"Tuesday, 03-Nov-26 10:01:00 GMT", time.Minute, true}, // RFC 850, still allowed
		{"Tue, 03 Nov 2026 09:00:00 GMT", 0, true},
		{"1.5", 0, false},
		{"-1", 0, false},
	}
	for _, tt := range tests {
		resp := &http.Response{Header: http.Header{}}
		if tt.header != "" {
			resp.Header.Set("Retry-After", tt.header)
		}
		got, ok := retryAfter(resp, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := retryAfter(nil, now); ok {
		t.Error("retryAfter(nil) reported a value")
	}
}

// TestRetriesUntilSuccess: 503 twice, then the answer.
func TestRetriesUntilSuccess(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			reply(503, "application/json", `{"code":"unavailable","message":"busy"}`)(n, w, r)
			return
		}
		reply(200, "application/json", created)(n, w, r)
	})
	b := newBackend(t, Config{}, srv.URL)
	ctx, info := callContext(t)
	if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	if info.Attempts() != 3 || srv.hits.Load() != 3 {
		t.Errorf("%d attempts counted, %d received; want 3", info.Attempts(), srv.hits.Load())
	}
}

// TestRetryAfterIsHonoured: a 429 asking for one second gets at least that.
func TestRetryAfterIsHonoured(t *testing.T) {
	var first atomic.Int64 // UnixNano of the first attempt; the handlers may run on different goroutines
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			first.Store(time.Now().UnixNano())
			w.Header().Set("Retry-After", "1")
			reply(429, "application/json", `{"code":"resource_exhausted","message":"slow down"}`)(n, w, r)
			return
		}
		if waited := time.Since(time.Unix(0, first.Load())); waited < 950*time.Millisecond {
			t.Errorf("second attempt %v after the first, want at least 1s", waited)
		}
		reply(200, "application/json", created)(n, w, r)
	})
	b := newBackend(t, Config{Retry: Retry{MaxBackoff: 5 * time.Second}}, srv.URL)
	ctx, info := callContext(t)
	start := time.Now()
	if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 950*time.Millisecond {
		t.Errorf("call took %v, want at least the 1s the appliance asked for", took)
	}
	if info.Attempts() != 2 {
		t.Errorf("%d attempts, want 2", info.Attempts())
	}
}

// TestFinalAnswersAreNotRetried: one attempt for answers that retrying cannot change.
func TestFinalAnswersAreNotRetried(t *testing.T) {
	tests := []struct {
		status int
		body   string
		class  backends.Class
	}{
		{400, `{"code":"invalid_argument","message":"bad name"}`, backends.ClassInvalid},
		{404, "", backends.ClassUnavailable},
		{404, `{"code":"not_found","message":"no such volume"}`, backends.ClassNotFound},
		{500, `{"code":"internal","message":"bug"}`, backends.ClassInternal},
		{500, "", backends.ClassInternal},
		{501, `{"code":"unimplemented"}`, backends.ClassUnimplemented},
		{409, `{"code":"aborted","message":"pending"}`, backends.ClassAborted},
		{401, "", backends.ClassUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status)+tt.body, func(t *testing.T) {
			srv := newServer(t, reply(tt.status, "application/json", tt.body))
			b := newBackend(t, Config{}, srv.URL)
			ctx, info := callContext(t)
			_, err := b.Unary(ctx, createPath, createRequest(t))
			e := checkError(t, err, tt.class)
			if info.Attempts() != 1 || srv.hits.Load() != 1 {
				t.Errorf("%d attempts counted, %d received; want 1", info.Attempts(), srv.hits.Load())
			}
			if got := e.Message; strings.Contains(got, "gave up") {
				t.Errorf("message %q talks of giving up after one attempt", got)
			}
		})
	}
}

// TestRetriesRunOut: a status that stays transient ends after MaxAttempts.
func TestRetriesRunOut(t *testing.T) {
	for _, status := range []int{429, 502, 503, 504} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			srv := newServer(t, reply(status, "text/plain", "still busy"))
			b := newBackend(t, Config{Retry: Retry{MaxAttempts: 3}}, srv.URL)
			ctx, info := callContext(t)
			_, err := b.Unary(ctx, createPath, createRequest(t))
			checkError(t, err, classOfStatus(status), "still busy", "gave up after 3 attempts")
			if info.Attempts() != 3 || srv.hits.Load() != 3 {
				t.Errorf("%d attempts counted, %d received; want 3", info.Attempts(), srv.hits.Load())
			}
		})
	}
}

// TestBackoffPastDeadlineStopsEarly: when the wait would pass the caller's deadline, the
// call ends at once with the last answer, not when the deadline passes.
func TestBackoffPastDeadlineStopsEarly(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		reply(503, "application/json", `{"code":"unavailable","message":"controller failover in progress"}`)(n, w, r)
	})
	b := newBackend(t, Config{Retry: Retry{MaxBackoff: 5 * time.Second}}, srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	ctx, info := backends.WithCallInfo(ctx)
	_, err := b.Unary(ctx, createPath, createRequest(t))
	checkError(t, err, backends.ClassUnavailable, "controller failover in progress",
		"gave up after 1 attempt: the next retry, in 3s, would pass the caller's deadline")
	if ctx.Err() != nil {
		t.Error("the call returned after the caller's deadline; it should have stopped before")
	}
	if info.Attempts() != 1 {
		t.Errorf("%d attempts, want 1", info.Attempts())
	}
}

// TestRetryAfterLongerThanMaxBackoffStops: the appliance asks for longer than the gateway
// will wait between attempts.
func TestRetryAfterLongerThanMaxBackoffStops(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		reply(429, "", "")(n, w, r)
	})
	b := newBackend(t, Config{Retry: Retry{MaxBackoff: time.Second}}, srv.URL)
	_, err := b.Unary(t.Context(), createPath, createRequest(t))
	checkError(t, err, backends.ClassUnavailable, "HTTP 429",
		"the appliance asked to retry after 2m0s, longer than backends.array1.retry.maxBackoff (1s)")
	if srv.hits.Load() != 1 {
		t.Errorf("%d attempts, want 1", srv.hits.Load())
	}
}

// TestCallerDeadlineWhileWaiting: the appliance never answers within the deadline.
func TestCallerDeadlineWhileWaiting(t *testing.T) {
	srv := newServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	b := newBackend(t, Config{}, srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := b.Unary(ctx, createPath, createRequest(t))
	checkError(t, err, backends.ClassDeadline, `backend "array1": CreateVolume: the caller's deadline passed after 1 attempt`)
}

// TestCallerCancel: a cancel ends the call, in flight or between attempts.
func TestCallerCancel(t *testing.T) {
	t.Run("in flight", func(t *testing.T) {
		arrived := make(chan struct{})
		srv := newServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-r.Context().Done()
		})
		b := newBackend(t, Config{}, srv.URL)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-arrived; cancel() }()
		_, err := b.Unary(ctx, createPath, createRequest(t))
		checkError(t, err, backends.ClassCanceled, "the caller canceled the call after 1 attempt")
	})
	t.Run("between attempts", func(t *testing.T) {
		answered := make(chan struct{}, 1)
		srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
			reply(503, "text/plain", "restarting")(n, w, r)
			answered <- struct{}{}
		})
		b := newBackend(t, Config{Retry: Retry{MinBackoff: time.Minute, MaxBackoff: time.Minute}}, srv.URL)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-answered; time.Sleep(50 * time.Millisecond); cancel() }()
		_, err := b.Unary(ctx, createPath, createRequest(t))
		checkError(t, err, backends.ClassCanceled, "the caller canceled the call after 1 attempt",
			"the last failed attempt: HTTP 503 Service Unavailable: restarting")
	})
	t.Run("before the call", func(t *testing.T) {
		srv := newServer(t, reply(200, "application/json", created))
		b := newBackend(t, Config{}, srv.URL)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := b.Unary(ctx, createPath, createRequest(t))
		checkError(t, err, backends.ClassCanceled, "the caller canceled the call before it was sent")
		if srv.hits.Load() != 0 {
			t.Errorf("%d requests reached the appliance, want 0", srv.hits.Load())
		}
	})
}

// TestAttemptTimeoutWithoutDeadline: a call without a deadline gives each attempt
// RequestTimeout, and a timed-out attempt is retried.
func TestAttemptTimeoutWithoutDeadline(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done()
			return
		}
		reply(200, "application/json", created)(n, w, r)
	})
	b := newBackend(t, Config{RequestTimeout: 100 * time.Millisecond}, srv.URL)
	ctx, info := backends.WithCallInfo(context.Background())
	if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	if info.Attempts() != 2 {
		t.Errorf("%d attempts, want 2", info.Attempts())
	}

	hang := newServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	b = newBackend(t, Config{RequestTimeout: 50 * time.Millisecond, Retry: Retry{MaxAttempts: 2}}, hang.URL)
	_, err := b.Unary(context.Background(), createPath, createRequest(t))
	checkError(t, err, backends.ClassDeadline, "did not answer in time", "one attempt may take 50ms", "backends.array1.requestTimeout",
		"gave up after 2 attempts")
}
