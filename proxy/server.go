package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
	"github.com/csi-gateway/csi-gateway/redact"
)

// Options configure a Server. Backends are built by the caller and owned by it.
type Options struct {
	Routes   []Route
	Backends map[string]backends.Backend
	Log      *slog.Logger
	// SafeContextKeys are volume_context / publish_context keys whose values may be logged.
	SafeContextKeys []string
	// DescriptorSets are services the gateway does not compile in whose calls it decodes,
	// redacts and scrubs (see DescriptorSet); calls of other unknown services pass as raw
	// frames, logged by name and size only.
	DescriptorSets []*DescriptorSet
	// Observers receive a record of every finished call (the live tap).
	Observers []CallObserver
	// Metrics, when set, counts the calls in flight and records every finished call.
	Metrics *Metrics
	// StatsHandlers see every call of every listener, as grpc's stats handlers do (e.g.
	// TracingStatsHandler).
	StatsHandlers []stats.Handler
	// Validation is what the gateway does with calls that break the CSI spec's rules
	// (enforce, warn or off; see validate). The zero value is off; the configuration's
	// default is enforce.
	Validation ValidationMode
	// Serializer is the table of operations in flight per volume, snapshot and group, shared
	// by every listener (see Serializer); nil: the server makes its own.
	Serializer *Serializer
	// Timeouts bound every call's deadline per method (see NewTimeouts and limitDeadlines);
	// nil: the built-in limits (30 s default, 2 min for calls that change storage or mount,
	// 10 min cap).
	Timeouts *Timeouts
	// Transport is how listeners read and write gRPC; the zero value is DefaultTransport.
	Transport Transport
	// Tenancy is the ledger of a gateway shared by tenants (see ListenerPolicy.Tenant and
	// auth.ClientRule.Tenant); nil: no caller may act for a tenant.
	Tenancy *tenancy.Ledger
	// Repairs are what the gateway may change in each backend's answers, by backend name
	// (see Repair); a backend not listed takes RepairPlugin.
	Repairs map[string]Repair
	// Limits are the hard limits of every listener, on either transport (see TransportLimits); zero
	// fields take the defaults.
	Limits TransportLimits
	// Readiness answers the gRPC health service of every listener (see healthServer), as it
	// answers /readyz; nil: the server checks the backends with a Readiness of its own, which
	// counts the listeners as serving.
	Readiness *Readiness
}

// ListenerPolicy is what one listener admits. Who may connect (AllowUIDs and AllowGIDs, or
// Clients) is checked in the handshake; what an admitted caller may do (Methods, Tenant, a
// client rule's tenant) is checked per call.
type ListenerPolicy struct {
	// Creds are the listener's transport credentials. Nil means a Unix socket: callers are
	// identified by their peer credentials and checked against AllowUIDs and AllowGIDs.
	// Otherwise (TCP: TLS from tlsconf through credentials.NewTLS, or plaintext) callers
	// are checked against Clients.
	Creds credentials.TransportCredentials
	// AllowUIDs and AllowGIDs admit Unix callers by peer credentials; both empty admits
	// every caller the socket's mode lets in.
	AllowUIDs, AllowGIDs []uint32
	// Clients admits callers of a listener with Creds by their verified certificate; empty
	// admits every caller the credentials let in. A rule's Tenant confines its callers.
	Clients auth.ClientAllowList
	// Methods are the methods callers of this listener may call; empty: all.
	Methods auth.MethodAllowList
	// Tenant confines every caller of this listener whose client rule names none.
	Tenant string
}

// authorizer returns what decides who may call through the listener.
func (p ListenerPolicy) authorizer() auth.Authorizer {
	if p.Creds == nil {
		return auth.UIDAllowList{UIDs: p.AllowUIDs, GIDs: p.AllowGIDs}
	}
	return p.Clients
}

// Server accepts CSI calls on any number of listeners and passes each through the one
// middleware chain to its backend. It is safe for concurrent use.
type Server struct {
	opts     Options
	methods  methodTable
	routes   routeTable
	redactor *redact.Redactor
	// readiness and reflection answer the built-in services (builtin.go).
	readiness  *Readiness
	reflection *gatewayReflection
	// stopping is closed when Shutdown begins: health watches end then, rather than hold the
	// graceful stop for the whole grace period.
	stopping chan struct{}

	mu      sync.Mutex
	servers []listenerServer
	closed  bool
}

// NewServer checks the routes against the backends and returns a server ready to Serve.
func NewServer(o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Transport == "" {
		o.Transport = DefaultTransport
	}
	routes, err := newRouteTable(o.Routes, func(name string) bool { return o.Backends[name] != nil })
	if err != nil {
		return nil, err
	}
	readiness := o.Readiness
	if readiness == nil {
		readiness = NewReadiness(o.Backends)
		readiness.SetListening(true)
	}
	methods := newMethodTable(o.DescriptorSets...)
	var secretFields []protoreflect.FullName
	for _, ds := range o.DescriptorSets {
		secretFields = append(secretFields, ds.SecretFields...)
	}
	return &Server{
		opts:       o,
		methods:    methods,
		routes:     routes,
		redactor:   redact.NewRedactor(redact.WithSafeContextKeys(o.SafeContextKeys...), redact.WithSecretFields(secretFields...)),
		readiness:  readiness,
		reflection: newGatewayReflection(methods, routedBackends(routes, o.Backends)),
		stopping:   make(chan struct{}),
	}, nil
}

// handler composes the middleware chain, outermost first; docs/architecture.md lists it with
// what each middleware does (TestChainMatchesHandler, in docs/, compares the two).
//
// Who may call at all is decided before the chain, in the listener's handshake (see
// ListenerPolicy.admitting): a refused caller's connection never carries a call.
// The log, the observers, the span and the metrics sit outside confine so calls it refuses
// are seen too, and outside canonicalize so they record the code the caller actually gets.
// Serialization sits outside tenant scoping so that identical calls of a tenant are joined
// before tenancy takes a quota hold for them (see serializeCalls).
// The server span itself comes from the OpenTelemetry stats handler in Options.StatsHandlers.
// Validation, tenancy and serialization answer with final statuses of their own.
func (s *Server) handler(p ListenerPolicy) Handler {
	return chain(dispatch(s.routes, s.opts.Backends),
		recoverPanics(s.opts.Log),
		logCalls(s.opts.Log, s.redactor),
		observeCalls(s.opts.Observers),
		annotateSpan(s.redactor),
		s.opts.Metrics.Measure(),
		confine(p),
		limitDeadlines(s.opts.Timeouts),
		validate(s.opts.Validation, s.routes, s.opts.Backends, s.opts.Repairs, s.opts.Log),
		s.serialize(),
		scopeTenants(s.opts.Tenancy, s.methods),
		canonicalize(s.redactor, s.opts.Repairs),
		guardListings(),
	)
}

// Serve accepts calls on l until Shutdown, with p's transport credentials: without any, l
// must be a Unix socket listener (peer credentials identify callers). Callers p does not
// admit are refused in the handshake; connections beyond Options.Limits.MaxConnections are
// closed as soon as they are accepted. It returns nil after Shutdown.
func (s *Server) Serve(l net.Listener, p ListenerPolicy) error {
	creds := p.admitting(l, s.opts.Log)
	l = s.opts.Limits.limitConnections(l, s.opts.Log)
	gs := s.newListenerServer(creds, s.streamHandler(s.handler(p), s.builtins(p)))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close() // as grpc's Serve does: the listener (and its Unix socket) goes away
		return fmt.Errorf("server is shut down")
	}
	s.servers = append(s.servers, gs)
	s.mu.Unlock()
	return gs.Serve(l)
}

// streamHandler adapts a Handler to grpc's unknown-service handler, which receives every
// method: a built-in method (health, reflection) is answered at once, without the chain;
// any other is a Call: it reads a unary request as one raw frame, runs the chain and writes
// the raw response. Streaming methods and methods the gateway does not know keep their stream.
func (s *Server) streamHandler(h Handler, builtins builtinMethods) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		if answer := builtins[method]; answer != nil {
			return answer(stream)
		}
		call := &Call{Method: method, Start: time.Now(), info: s.methods[method], redactor: s.redactor}
		ctx := stream.Context()
		ctx = auth.NewContext(ctx, identify(ctx))
		ctx, ci := backends.WithCallInfo(ctx)
		ci.SetScrubber(call)
		if call.info == nil || call.info.desc.IsStreamingClient() {
			call.Stream = stream // forwarded frame by frame, never decoded
			return h(ctx, call)
		}
		// Unary and server-streaming calls have exactly one request: read it whole, so the
		// chain can decode it, log it and scrub its secrets from whatever comes back.
		var req rawcodec.Frame
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		call.Request = req.Payload
		if call.info.desc.IsStreamingServer() {
			call.Stream = &replayStream{ServerStream: stream, first: req.Payload}
			return h(ctx, call)
		}
		if err := h(ctx, call); err != nil {
			return err
		}
		return stream.SendMsg(&rawcodec.Frame{Payload: call.Response})
	}
}

// Shutdown stops accepting calls and waits for the calls in flight to finish; when ctx ends
// first, the remaining calls are cancelled. Listeners are closed, which removes Unix sockets.
func (s *Server) Shutdown(ctx context.Context) {
	s.mu.Lock()
	if !s.closed {
		close(s.stopping)
	}
	s.closed = true
	servers := s.servers
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for _, gs := range servers {
			gs.GracefulStop()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		for _, gs := range servers {
			gs.Stop()
		}
		<-done
	}
}
