package proxy

import (
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/csi-gateway/csi-gateway/backends"
)

// maxReadyReason bounds the body of a 503 from /readyz: enough for a reason per backend of a
// large gateway, never a wall of text in a probe log.
const maxReadyReason = 4096

// AdminOptions are what the admin endpoints serve. A nil field turns its path off (404).
type AdminOptions struct {
	// Metrics serves GET /metrics, usually (*Metrics).Handler().
	Metrics http.Handler
	// Readiness answers GET /readyz.
	Readiness *Readiness
	// Tap serves GET /debug/tap (and paths below it): the live, redacted call tap.
	Tap http.Handler
	// RemoteTap serves the tap to any peer. Off, only a loopback peer is served it (an
	// operator on the host, `kubectl port-forward` or `kubectl exec`) and any other gets 403:
	// the listener is often on a pod or host address for probes and metrics, and the tap
	// shows every call.
	RemoteTap bool
}

// NewAdminHandler returns the handler of the admin listener:
//
//	GET /metrics     Prometheus metrics (o.Metrics)
//	GET /healthz     200 "ok" while the process serves HTTP at all; it checks no backend, so
//	                 a liveness probe does not restart the gateway for a backend outage
//	GET /readyz      200 "ready", or 503 and why not (listeners down, a backend not ready)
//	GET /debug/tap   o.Tap; to loopback peers only unless o.RemoteTap
//
// Any other path is 404; another method on a known path is 405. Nothing served here carries a
// secret: metrics have no payload labels, readiness reasons are backend error messages
// (secret-free by contract) and tap records are redacted. It is safe for concurrent use.
func NewAdminHandler(o AdminOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := o.route(r.URL.Path)
		if h == nil {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "405 method not allowed: use GET", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// route returns the handler of path, or nil when nothing is served there.
func (o AdminOptions) route(path string) http.Handler {
	switch {
	case path == "/metrics":
		return nilIfUnset(o.Metrics)
	case path == "/healthz":
		return http.HandlerFunc(serveHealthz)
	case path == "/readyz":
		if o.Readiness == nil {
			return nil
		}
		return readyzHandler(o.Readiness)
	case path == "/debug/tap" || strings.HasPrefix(path, "/debug/tap/"):
		tap := nilIfUnset(o.Tap)
		if tap == nil || o.RemoteTap {
			return tap
		}
		return loopbackOnly(tap)
	}
	return nil
}

// loopbackOnly serves h to peers on a loopback address; any other gets 403 saying how to
// reach it.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			writeText(w, http.StatusForbidden, "403 forbidden: the tap is served to loopback peers only; "+
				"connect from the gateway's host (or kubectl port-forward), or set admin.remoteTap: true\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// nilIfUnset turns a nil handler (including a typed nil func) into a plain nil.
func nilIfUnset(h http.Handler) http.Handler {
	if f, ok := h.(http.HandlerFunc); ok && f == nil {
		return nil
	}
	return h
}

func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

func readyzHandler(rd *Readiness) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := rd.Check(r.Context()); err != nil {
			writeText(w, http.StatusServiceUnavailable, backends.Truncate(err.Error(), maxReadyReason))
			return
		}
		writeText(w, http.StatusOK, "ready")
	})
}

// writeText answers a plain-text body that no cache keeps and no browser sniffs.
func writeText(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	io.WriteString(w, body)
}
