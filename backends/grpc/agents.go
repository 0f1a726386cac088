package grpcbackend

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/csi-gateway/csi-gateway/internal/h2grpc"
)

// The caller's user-agent reaches the driver: a driver behind the gateway sees on a forwarded
// call the user-agent its caller sent ("csi-provisioner/v5.1.0 grpc-go/1.70.0"), followed by
// the token of the gateway's HTTP/2 client (" grpc-go/1.85.0", or " grpc-go-h2grpc/1" with
// WithFrames), as every grpc-go client appends its own. The backend's own calls (readiness
// probes, the gateway's capability fetches: their context has no caller) carry WithUserAgent's.
//
// grpc-go sends the user-agent of the ClientConn (grpc.WithUserAgent) on every call, and drops
// "user-agent" from a call's outgoing metadata (a reserved header): it has no per-call way to
// set it (its HTTP/2 client writes the connection's value, then the metadata minus reserved
// keys). So on grpc-go's transport the calls of one user-agent go over connections of their
// own: an agent holds one ClientConn per target, dialled with the backend's options plus that
// user-agent. The frame client sets a user-agent per call (h2grpc.CallUserAgent); there an
// agent holds that call option, made once.
//
// A pod has few distinct callers (csi-provisioner, csi-attacher, csi-resizer,
// csi-snapshotter, kubelet, livenessprobe, ...), so a small set holds them all. It is bounded
// (maxAgents), and a caller cannot make the gateway open connections without end: when the set
// is full, a new user-agent takes the place of the one unused for longest, if that one has no
// call in flight and none for agentIdle; else its calls carry the backend's own user-agent over
// the backend's own connections (logged once) — with the frame client, which needs no
// connection for it, they keep their caller's. grpc-go closes the connection of an agent with
// no call for 30 minutes (its channel idleness) and makes it again on the next call; Close
// closes them all.

// Bounds of the agents.
const (
	// maxAgents is how many user-agents have connections of their own, at most.
	maxAgents = 16
	// agentIdle is how long an agent must have had no call before a new user-agent may take
	// its place in a full set: callers that come and go cannot make the gateway dial and
	// close connections faster than maxAgents per agentIdle.
	agentIdle = 5 * time.Minute
	// maxUserAgentBytes is as much of a caller's user-agent as goes on to the driver. Real ones
	// are a few dozen bytes ("csi-provisioner/v5.1.0 grpc-go/1.70.0"); the gateway's listener
	// alone would let one grow to its whole header list (64 KiB by default).
	maxUserAgentBytes = 256
)

// agentOptions are the agents' settings among the options; tests change them.
type agentOptions struct {
	limit int
	idle  time.Duration
	now   func() time.Time
}

func defaultAgentOptions() agentOptions {
	return agentOptions{limit: maxAgents, idle: agentIdle, now: time.Now}
}

// callerAgent returns the caller's user-agent as it goes on to the driver, from the caller's
// incoming metadata: its first value, cut to maxUserAgentBytes; "" when there is none, or when
// it is not printable ASCII (a header value no gRPC client may send).
func callerAgent(in metadata.MD) string {
	v := in["user-agent"]
	if len(v) == 0 {
		return ""
	}
	ua := v[0]
	if len(ua) > maxUserAgentBytes {
		ua = ua[:maxUserAgentBytes]
	}
	for i := 0; i < len(ua); i++ {
		if c := ua[i]; c < 0x20 || c > 0x7E {
			return ""
		}
	}
	return ua
}

// agent is how the calls of one user-agent reach the driver.
type agent struct {
	ua    string
	conns []*grpc.ClientConn // grpc-go's transport: one per target, by target index
	opt   grpc.CallOption    // the frame client: sets ua on a call

	// Under agentSet.mu; an agent made for one call past the bound is not kept.
	kept  bool
	calls int       // in flight
	used  time.Time // when the last call began
}

// over returns what a call of a goes over at target t, and the grpc-go connection that wake
// must bring up before it (nil with the frame client). A nil agent is the backend's own.
func (a *agent) over(t *target) (grpc.ClientConnInterface, *grpc.ClientConn) {
	if a == nil || a.conns == nil {
		return t.calls, t.conn
	}
	c := a.conns[t.index]
	return c, c
}

// catchUp wakes a's connection to t when it is failing while the backend's own connection there
// is ready: the driver is up, and a's connection only waits out its reconnect backoff (up to
// 5 s on a socket, 2 min over TCP), during which grpc-go fails its calls at once. The backend's
// own connection is the one readiness probes wake (Ready), so a caller's calls find the driver
// as the backend's readiness does: the agents are one backend with it.
func (a *agent) catchUp(ctx context.Context, t *target) {
	if a == nil || a.conns == nil {
		return
	}
	if c := a.conns[t.index]; c.GetState() == connectivity.TransientFailure && t.conn.GetState() == connectivity.Ready {
		wake(ctx, c)
	}
}

// withOption returns opts with a's call option added, if it has one.
func (a *agent) withOption(opts []grpc.CallOption) []grpc.CallOption {
	if a == nil || a.opt == nil {
		return opts
	}
	return append(opts, a.opt)
}

// close closes a's connections; a may be nil.
func (a *agent) close() error {
	if a == nil {
		return nil
	}
	errs := make([]error, 0, len(a.conns))
	for _, c := range a.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// agentSet holds a backend's agents, by user-agent. It is safe for concurrent use.
type agentSet struct {
	open    func(ua string) (*agent, error) // makes a new agent
	perCall bool                            // agents cost no connection (the frame client)
	opts    agentOptions
	log     *slog.Logger

	mu     sync.Mutex
	byUA   map[string]*agent
	closed bool
	warned bool // the log has said the set is full
}

func newAgentSet(open func(string) (*agent, error), perCall bool, opts agentOptions, log *slog.Logger) *agentSet {
	return &agentSet{open: open, perCall: perCall, opts: opts, log: log, byUA: make(map[string]*agent)}
}

// acquire returns the agent a call from ua goes through, made on the first call from ua, and
// counts the call in flight until release. It returns nil (the backend's own connections and
// user-agent) for "", after close, and, on grpc-go's transport, for a new user-agent when the
// set is full and no agent may give its place.
func (s *agentSet) acquire(ua string) *agent {
	if ua == "" {
		return nil
	}
	s.mu.Lock()
	a := s.byUA[ua]
	var evicted *agent
	full := false
	if a == nil && !s.closed {
		a, evicted, full = s.add(ua)
	}
	if a != nil && a.kept {
		a.calls++
		a.used = s.opts.now()
	}
	warn := full && !s.perCall && !s.warned
	s.warned = s.warned || warn
	s.mu.Unlock()
	if err := evicted.close(); err != nil {
		s.log.Warn("grpc backend: closing the connections of a caller's user-agent", "user_agent", evicted.ua, "error", err)
	}
	if warn {
		s.log.Warn("grpc backend: too many distinct caller user-agents; calls of new ones reach the driver with the gateway's user-agent",
			"limit", s.opts.limit, "user_agent", ua)
	}
	if full && s.perCall {
		return s.newAgent(ua) // one for this call
	}
	return a
}

// add makes ua's agent and keeps it, in the place of an idle one when the set is full (that
// one is returned, to be closed); full says that no place could be made. Called with s.mu held.
func (s *agentSet) add(ua string) (a, evicted *agent, full bool) {
	if len(s.byUA) >= s.opts.limit {
		if evicted = s.idlest(); evicted == nil {
			return nil, nil, true
		}
		delete(s.byUA, evicted.ua)
	}
	if a = s.newAgent(ua); a != nil {
		a.kept = true
		s.byUA[ua] = a
	}
	return a, evicted, false
}

// newAgent makes an agent for ua; nil when it cannot be made (the backend's options work for its
// own connections, so this is not expected).
func (s *agentSet) newAgent(ua string) *agent {
	a, err := s.open(ua)
	if err != nil {
		s.log.Warn("grpc backend: cannot make connections for a caller's user-agent; its calls carry the gateway's", "user_agent", ua, "error", err)
		return nil
	}
	return a
}

// idlest returns the agent unused for longest if it has no call in flight and none for the idle
// time, else nil. Called with s.mu held.
func (s *agentSet) idlest() *agent {
	var oldest *agent
	for _, a := range s.byUA {
		if a.calls == 0 && (oldest == nil || a.used.Before(oldest.used)) {
			oldest = a
		}
	}
	if oldest == nil || s.opts.now().Sub(oldest.used) < s.opts.idle {
		return nil
	}
	return oldest
}

// release ends a call acquire counted; a may be nil.
func (s *agentSet) release(a *agent) {
	if a == nil || !a.kept {
		return
	}
	s.mu.Lock()
	a.calls--
	s.mu.Unlock()
}

// close closes every agent; later calls get none (acquire returns nil).
func (s *agentSet) close() error {
	s.mu.Lock()
	s.closed = true
	all := s.byUA
	s.byUA = nil
	s.mu.Unlock()
	errs := make([]error, 0, len(all))
	for _, a := range all {
		errs = append(errs, a.close())
	}
	return errors.Join(errs...)
}

// openAgent makes the agent of ua for b: its own connection to each target, or with the frame
// client its call option.
func (b *Backend) openAgent(ua string) (*agent, error) {
	if b.dialer.o.frames {
		return &agent{ua: ua, opt: h2grpc.CallUserAgent(ua)}, nil
	}
	a := &agent{ua: ua}
	for _, t := range b.targets {
		_, conn, err := b.dialer.dial(t.addr, t.kind, ua)
		if err != nil {
			a.close()
			return nil, err
		}
		a.conns = append(a.conns, conn)
	}
	return a, nil
}
