package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

// TestFailover: the first URL refuses connections, the second serves; the next call goes
// straight to the second.
func TestFailover(t *testing.T) {
	good := newServer(t, reply(200, "application/json", created))
	b := newBackend(t, Config{}, refusedURL(t), good.URL)
	for i, want := range []int{2, 1} {
		ctx, info := callContext(t)
		if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if info.Attempts() != want {
			t.Errorf("call %d: %d attempts, want %d", i+1, info.Attempts(), want)
		}
	}
	if good.hits.Load() != 2 {
		t.Errorf("the second URL got %d calls, want 2", good.hits.Load())
	}
}

// TestFailoverWrapsAround: the URL that worked last comes first, and when it stops
// answering the calls go back to the first.
func TestFailoverWrapsAround(t *testing.T) {
	first := newServer(t, reply(200, "application/json", created))
	second := newServer(t, reply(200, "application/json", created))
	b := newBackend(t, Config{}, first.URL, second.URL)
	b.preferred.Store(1)
	second.Close()
	ctx, info := callContext(t)
	if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	if info.Attempts() != 2 || first.hits.Load() != 1 || b.preferred.Load() != 0 {
		t.Errorf("%d attempts, first URL %d calls, preferred %d; want 2, 1, 0", info.Attempts(), first.hits.Load(), b.preferred.Load())
	}
}

// TestNoFailoverOnAnswers: a URL that answers, even 503, is not left for the next one.
func TestNoFailoverOnAnswers(t *testing.T) {
	busy := newServer(t, reply(503, "text/plain", "busy"))
	other := newServer(t, reply(200, "application/json", created))
	b := newBackend(t, Config{Retry: Retry{MaxAttempts: 3}}, busy.URL, other.URL)
	_, err := b.Unary(t.Context(), createPath, createRequest(t))
	checkError(t, err, backends.ClassUnavailable, "busy", "gave up after 3 attempts")
	if busy.hits.Load() != 3 || other.hits.Load() != 0 {
		t.Errorf("calls: %d to the first URL, %d to the second; want 3 and 0", busy.hits.Load(), other.hits.Load())
	}
}

// TestAllURLsDown: the message names the URL tried last.
func TestAllURLsDown(t *testing.T) {
	a, b2 := refusedURL(t), refusedURL(t)
	b := newBackend(t, Config{Retry: Retry{MaxAttempts: 4}}, a, b2)
	ctx, info := callContext(t)
	_, err := b.Unary(ctx, createPath, createRequest(t))
	checkError(t, err, backends.ClassUnavailable, "cannot connect to "+b2, "gave up after 4 attempts")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %v does not wrap ECONNREFUSED as its cause", err)
	}
	if info.Attempts() != 4 {
		t.Errorf("%d attempts, want 4", info.Attempts())
	}
}

// TestRequestOnTheWire checks path, headers and body of what the backend sends.
func TestRequestOnTheWire(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/csi/csi.v1.Controller/CreateVolume" || r.URL.RawQuery != "" {
			t.Errorf("request %s %s, want POST /api/csi/csi.v1.Controller/CreateVolume", r.Method, r.URL)
		}
		reply(200, "application/json", created)(n, w, r)
	})
	b := newBackend(t, Config{RequestTimeout: 42 * time.Second}, srv.URL+"/api/csi/")

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Unary(context.Background(), createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for i, h := range srv.headers {
		if h.Get("Content-Type") != "application/json" || h.Get("Connect-Protocol-Version") != "1" {
			t.Errorf("call %d: Content-Type %q, Connect-Protocol-Version %q", i+1, h.Get("Content-Type"), h.Get("Connect-Protocol-Version"))
		}
	}
	if ms, _ := strconv.Atoi(srv.headers[0].Get("Connect-Timeout-Ms")); ms <= 9000 || ms > 10000 {
		t.Errorf("Connect-Timeout-Ms %q with a 10s deadline", srv.headers[0].Get("Connect-Timeout-Ms"))
	}
	if got := srv.headers[1].Get("Connect-Timeout-Ms"); got != "42000" {
		t.Errorf("Connect-Timeout-Ms %q without a deadline, want the request timeout, 42000", got)
	}
	var got csi.CreateVolumeRequest
	if err := protojson.Unmarshal([]byte(srv.bodies[0]), &got); err != nil {
		t.Fatalf("body %s: %v", srv.bodies[0], err)
	}
	want := &csi.CreateVolumeRequest{}
	if err := proto.Unmarshal(createRequest(t), want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, want) {
		t.Errorf("body decodes to %v, want %v", &got, want)
	}
}

// TestRetryRefreshesTimeout: each attempt says how much of the deadline is left.
func TestRetryRefreshesTimeout(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			reply(503, "", "")(n, w, r)
			return
		}
		reply(200, "application/json", created)(n, w, r)
	})
	b := newBackend(t, Config{Retry: Retry{MinBackoff: 200 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}, srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := b.Unary(ctx, createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	first, _ := strconv.Atoi(srv.headers[0].Get("Connect-Timeout-Ms"))
	second, _ := strconv.Atoi(srv.headers[1].Get("Connect-Timeout-Ms"))
	if second <= 0 || second > first-150 {
		t.Errorf("Connect-Timeout-Ms %d then %d; want the second smaller by the backoff (200ms)", first, second)
	}
}

// TestRedirectsAreNotFollowed: the request, secrets and all, must not go elsewhere.
func TestRedirectsAreNotFollowed(t *testing.T) {
	elsewhere := newServer(t, reply(200, "application/json", created))
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	b := newBackend(t, Config{}, srv.URL)
	_, err := b.Unary(t.Context(), createPath, createRequest(t))
	checkError(t, err, backends.ClassUnavailable, "HTTP 307 Temporary Redirect", "redirects are not followed", "backends.array1.urls")
	if elsewhere.hits.Load() != 0 || srv.hits.Load() != 1 {
		t.Errorf("the redirect target got %d requests, the appliance %d; want 0 and 1", elsewhere.hits.Load(), srv.hits.Load())
	}
}

// TestWithHTTPClient: the given client carries the requests, and the backend does not
// change it.
func TestWithHTTPClient(t *testing.T) {
	srv := newServer(t, reply(200, "application/json", created))
	var used bool
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	b, err := New(testName, Config{URLs: []string{srv.URL}, AllowSecretsOverPlaintextHTTP: true}, WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Unary(t.Context(), createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	if !used || hc.CheckRedirect != nil || hc.Timeout != 0 {
		t.Errorf("client used %v; CheckRedirect set %v, Timeout %v: the caller's client must be left alone",
			used, hc.CheckRedirect != nil, hc.Timeout)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
