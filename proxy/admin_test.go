package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/csi-gateway/csi-gateway/backends"
)

// adminDo sends method path to srv and returns the status, body and response headers.
func adminDo(t *testing.T, srv *httptest.Server, method, path string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

func textHandler(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body+" "+r.URL.Path)
	})
}

func TestAdminHandler(t *testing.T) {
	ready := listening(NewReadiness(map[string]backends.Backend{"a": &readyFake{}}))
	srv := httptest.NewServer(NewAdminHandler(AdminOptions{
		Metrics: textHandler("metrics"), Readiness: ready, Tap: textHandler("tap"),
	}))
	defer srv.Close()
	const notFound = "404 page not found\n"
	const notAllowed = "405 method not allowed: use GET\n"
	tests := []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/metrics", 200, "metrics /metrics"},
		{"GET", "/healthz", 200, "ok"},
		{"GET", "/readyz", 200, "ready"},
		{"GET", "/debug/tap", 200, "tap /debug/tap"},
		{"GET", "/debug/tap/stream", 200, "tap /debug/tap/stream"},
		{"GET", "/readyz?verbose=1", 200, "ready"},
		{"GET", "/", 404, notFound},
		{"GET", "/metrics/", 404, notFound},
		{"GET", "/debug/tapx", 404, notFound},
		{"GET", "/debug/pprof/", 404, notFound},
		{"GET", "/healthz/x", 404, notFound},
		{"POST", "/metrics", 405, notAllowed},
		{"PUT", "/healthz", 405, notAllowed},
		{"DELETE", "/readyz", 405, notAllowed},
		{"POST", "/debug/tap", 405, notAllowed},
		{"HEAD", "/healthz", 405, ""},
		{"POST", "/nowhere", 404, notFound},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			code, body, h := adminDo(t, srv, tt.method, tt.path)
			if code != tt.code || body != tt.body {
				t.Errorf("got %d %q, want %d %q", code, body, tt.code, tt.body)
			}
			if code == 405 && h.Get("Allow") != "GET" {
				t.Errorf("Allow = %q, want GET", h.Get("Allow"))
			}
			if tt.path == "/healthz" || tt.path == "/readyz" {
				if ct := h.Get("Content-Type"); code == 200 && ct != "text/plain; charset=utf-8" {
					t.Errorf("Content-Type = %q", ct)
				}
			}
		})
	}
}

// TestAdminTapLoopbackOnly: without RemoteTap the tap is served to a loopback peer (a real
// connection over 127.0.0.1, and ::1 where the host has it) and refused with 403 to any other
// peer address, while the other endpoints answer every peer; with RemoteTap every peer is
// served the tap.
func TestAdminTapLoopbackOnly(t *testing.T) {
	opts := AdminOptions{Metrics: textHandler("metrics"), Tap: textHandler("tap")}
	srv := httptest.NewServer(NewAdminHandler(opts))
	defer srv.Close()
	if code, body, _ := adminDo(t, srv, "GET", "/debug/tap"); code != 200 || body != "tap /debug/tap" {
		t.Errorf("over 127.0.0.1: %d %q, want the tap", code, body)
	}
	if l, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		srv6 := &httptest.Server{Listener: l, Config: &http.Server{Handler: NewAdminHandler(opts)}}
		srv6.Start()
		if code, body, _ := adminDo(t, srv6, "GET", "/debug/tap"); code != 200 || body != "tap /debug/tap" {
			t.Errorf("over ::1: %d %q, want the tap", code, body)
		}
		srv6.Close()
	}
	// Other peers are only RemoteAddr strings on a request handed to the handler, never
	// dialled: documentation addresses (RFC 5737, RFC 3849), a v4-mapped one, one without a
	// port and none at all.
	for _, remote := range []string{"192.0.2.10:40000", "[2001:db8::1]:40000", "[::ffff:192.0.2.10]:1", "192.0.2.11", ""} {
		for _, c := range []struct {
			remoteTap  bool
			path, want string
		}{
			{false, "/debug/tap", "403"},
			{false, "/debug/tap/stream", "403"},
			{false, "/metrics", "metrics /metrics"},
			{true, "/debug/tap", "tap /debug/tap"},
		} {
			o := opts
			o.RemoteTap = c.remoteTap
			req := httptest.NewRequest("GET", c.path, nil)
			req.RemoteAddr = remote
			rec := httptest.NewRecorder()
			NewAdminHandler(o).ServeHTTP(rec, req)
			body := rec.Body.String()
			if c.want == "403" {
				if rec.Code != 403 || !strings.Contains(body, "admin.remoteTap") {
					t.Errorf("peer %q, remoteTap %v, GET %s: %d %q, want 403 naming admin.remoteTap", remote, c.remoteTap, c.path, rec.Code, body)
				}
			} else if rec.Code != 200 || body != c.want {
				t.Errorf("peer %q, remoteTap %v, GET %s: %d %q, want %q", remote, c.remoteTap, c.path, rec.Code, body, c.want)
			}
		}
	}
}

// TestAdminUnset: an unset handler's path is 404, and /healthz still answers.
func TestAdminUnset(t *testing.T) {
	srv := httptest.NewServer(NewAdminHandler(AdminOptions{}))
	defer srv.Close()
	for _, path := range []string{"/metrics", "/readyz", "/debug/tap"} {
		if code, body, _ := adminDo(t, srv, "GET", path); code != 404 || body != "404 page not found\n" {
			t.Errorf("GET %s = %d %q, want 404", path, code, body)
		}
	}
	if code, body, _ := adminDo(t, srv, "GET", "/healthz"); code != 200 || body != "ok" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", code, body)
	}
}

// TestAdminReadyz: /readyz answers 503 with the reason while not ready, while /healthz stays
// 200 (liveness never depends on a backend); long reasons are cut.
func TestAdminReadyz(t *testing.T) {
	var fail error
	b := &readyFake{ready: func(context.Context) error { return fail }}
	rd := NewReadiness(map[string]backends.Backend{"array1": b}, WithReadyCacheTTL(0))
	srv := httptest.NewServer(NewAdminHandler(AdminOptions{Readiness: rd}))
	defer srv.Close()

	check := func(wantCode int, wantBody string) {
		t.Helper()
		code, body, h := adminDo(t, srv, "GET", "/readyz")
		if code != wantCode || body != wantBody {
			t.Errorf("/readyz = %d %q, want %d %q", code, body, wantCode, wantBody)
		}
		if h.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control = %q", h.Get("Cache-Control"))
		}
		if code, body, _ := adminDo(t, srv, "GET", "/healthz"); code != 200 || body != "ok" {
			t.Errorf("/healthz = %d %q, want 200 ok", code, body)
		}
	}
	check(503, "csi-gateway is not ready: its CSI listeners are not serving yet (starting) or any more (shutting down)")
	rd.SetListening(true)
	check(200, "ready")
	fail = errors.New("Identity/Probe: connection refused")
	check(503, `csi-gateway is not ready: backend "array1": Identity/Probe: connection refused`)

	fail = errors.New(strings.Repeat("é", 5000))
	code, body, _ := adminDo(t, srv, "GET", "/readyz")
	if code != 503 || len(body) > maxReadyReason || !strings.HasSuffix(body, "…") || !utf8.ValidString(body) ||
		!strings.HasPrefix(body, `csi-gateway is not ready: backend "array1": éé`) {
		t.Errorf("/readyz with a long reason = %d, %d bytes: %.80q…", code, len(body), body)
	}
	fail = nil
	check(200, "ready")
}
