package csp

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest"
)

// Backend serves CSI calls from a CSP. It implements backends.Backend and is safe for
// concurrent use.
type Backend struct {
	name    string
	cfg     Config
	profile profile
	client  *http.Client
	session *session
	closed  atomic.Bool
	logins  atomic.Int64 // successful logins, for tests and metrics
}

var _ backends.Backend = (*Backend)(nil)

// New returns the csp backend called name for cfg. opts set up its HTTP client as for the
// connect protocol (TLS, tracing). It opens no connection; Ready logs in.
func New(name string, cfg Config, opts ...rest.Option) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, rest.PrefixErrors("backends."+name+".", err)
	}
	p, _ := profileNamed(cfg.Profile)
	b := &Backend{name: name, cfg: cfg, profile: p, client: rest.NewHTTPClient(name, opts...)}
	b.session = &session{b: b,
		username: rest.NewSecretFile("backends."+name+".auth.usernameFile", cfg.UsernameFile),
		password: rest.NewSecretFile("backends."+name+".auth.passwordFile", cfg.PasswordFile)}
	return b, nil
}

// Unary serves one call: it decodes the request, runs the RPC's handler (handlers.go) and
// encodes the answer. A method without a handler is UNIMPLEMENTED.
func (b *Backend) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	h, ok := handlers[method]
	if !ok {
		return nil, backends.Errorf(backends.ClassUnimplemented, "backend %q: %s is not served by a CSP (a CSP is controller-only: route Node calls to a node driver)", b.name, method)
	}
	if b.closed.Load() {
		return nil, backends.Errorf(backends.ClassUnavailable, "backend %q: the backend is closed", b.name)
	}
	m := h.newRequest()
	if err := proto.Unmarshal(req, m); err != nil {
		return nil, backends.Errorf(backends.ClassInvalid, "backend %q: the request is not a valid %s: %v", b.name, m.ProtoReflect().Descriptor().FullName(), err)
	}
	resp, err := h.serve(ctx, b, m)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(resp)
}

// Stream: a CSP has no streaming calls.
func (b *Backend) Stream(_ context.Context, method string, _ grpc.ServerStream) error {
	return backends.Errorf(backends.ClassUnimplemented, "backend %q: %s is a streaming call; a CSP has none", b.name, method)
}

// Ready logs in (or uses the session) and looks up a volume name no one uses: any CSP
// answers that, with 404 and its error body. A 404 of another shape means a wrong URL.
func (b *Backend) Ready(ctx context.Context) error {
	if b.closed.Load() {
		return backends.Errorf(backends.ClassUnavailable, "backend %q: the backend is closed", b.name)
	}
	a, err := b.do(ctx, request{rpc: "Probe", method: http.MethodGet, path: "/volumes",
		query: url.Values{"name": {"csi-gateway-readiness-probe"}}, idempotent: true}, nil)
	if err != nil {
		return err
	}
	if a.status != http.StatusOK && !a.notFound(b.profile) {
		return b.classify("Probe", a)
	}
	return nil
}

// Close makes later calls fail with ClassUnavailable.
func (b *Backend) Close() error {
	b.closed.Store(true)
	b.client.CloseIdleConnections()
	return nil
}

// Logins returns how many times the backend logged in to the CSP.
func (b *Backend) Logins() int64 { return b.logins.Load() }
