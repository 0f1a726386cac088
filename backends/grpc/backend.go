package grpcbackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
)

// Backend forwards calls to a CSI driver over gRPC: one connection per target (Config.Targets),
// in failover order. It is safe for concurrent use. New returns it unconnected; each target's
// connection is made by the first call that goes there and remade, with backoff, whenever it
// breaks. Close releases them.
//
// A call goes to the target that worked last (at first, the first target). When it cannot
// reach that target's driver — no connection, so the driver never saw the request — the same
// call goes at once to the next target, and so on, each target at most once per call; the
// target that answers becomes the one the next calls go to (sticky: a target that comes back
// gets calls again only once the current one fails). Any answer of a driver, an error too,
// ends the call there: failover never repeats a request a driver may have seen.
type Backend struct {
	name         string
	target       string    // the first target, for Target
	targets      []*target // in failover order; never empty
	preferred    atomic.Int32
	readyTimeout time.Duration
	log          *slog.Logger

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	breaker *backends.Breaker // guards Unary and Stream (breaker.go); nil when disabled

	dialer dialer    // makes the targets' connections, and the agents'
	agents *agentSet // the callers' user-agents (agents.go)
}

var _ backends.Backend = (*Backend)(nil)

// Keepalive: on a Unix socket a dead peer is reported by the kernel at once, so pings only
// matter for TCP targets. Five minutes is the most frequent ping a grpc server accepts by
// default (its keepalive.EnforcementPolicy.MinTime); pinging faster makes drivers with default
// settings close the connection with ENHANCE_YOUR_CALM ("too_many_pings").
var keepaliveParams = keepalive.ClientParameters{Time: 5 * time.Minute, Timeout: 20 * time.Second}

// unixBackoff is grpc's default connect backoff shape (×1.6, ±20 %) starting at 100 ms
// instead of 1 s, with the ceiling lowered from 120 s to 5 s: a connect(2) on a local socket
// costs nothing, and a driver restarted by its supervisor should get calls again within a
// fraction of a second, not after a second of backoff. TCP targets keep grpc's default.
var unixBackoff = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}

// serviceConfig is the default service config: pick_first over the target's one address, and no
// retryPolicy, because retrying is the gateway's decision (it knows which CSI calls are safe to
// repeat); grpc still retries transparently a call that never reached the driver.
const serviceConfig = `{"loadBalancingConfig": [{"pick_first": {}}]}`

// New returns the backend called name (the key under backends: in the config, used in error
// messages) for the driver at cfg.Target, or at cfg.Targets. It checks every target and the
// credentials but does not connect: a driver that is not up yet is not an error here (see
// Ready).
func New(name string, cfg Config, opts ...Option) (*Backend, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	breaker, err := newBreaker(name, o.breaker)
	if err != nil {
		return nil, err
	}
	addrs, keys, err := cfg.targetList(name)
	if err != nil {
		return nil, err
	}
	kinds := make([]targetKind, len(addrs))
	for i, addr := range addrs {
		if kinds[i], err = parseTarget(keys[i], addr); err != nil {
			return nil, err
		}
		if err := checkCredentials(name, keys[i], addr, kinds[i], o.creds); err != nil {
			return nil, err
		}
	}
	b := &Backend{name: name, target: addrs[0], readyTimeout: o.readyTimeout, log: o.log}
	b.breaker = breaker
	b.dialer = dialer{o: o}
	if o.tracing.Enabled() {
		b.dialer.handlers = []stats.Handler{newClientTracing(name, o.tracing)}
	}
	b.agents = newAgentSet(b.openAgent, o.frames, o.agents, o.log)
	for i, addr := range addrs {
		calls, conn, err := b.dialer.dial(addr, kinds[i], o.userAgent)
		if err != nil {
			b.closeConns()
			return nil, fmt.Errorf("%s: %w", keys[i], err)
		}
		b.targets = append(b.targets, &target{index: i, addr: addr, key: keys[i], kind: kinds[i], conn: conn, calls: calls})
	}
	return b, nil
}

// dialer makes clients of the driver, all with the backend's options.
type dialer struct {
	o        options
	handlers []stats.Handler // shared by all its clients
}

// dial returns an (unconnected) client of the target at addr whose calls carry the user-agent
// ua (empty: the transport's token alone), which calls, streams and probes go over: the frame
// client (WithFrames), or grpc-go's, returned a second time as such (its connection state
// drives wake).
func (d dialer) dial(addr string, kind targetKind, ua string) (grpc.ClientConnInterface, *grpc.ClientConn, error) {
	o, handlers := d.o, d.handlers
	creds := o.creds
	if creds == nil {
		creds = insecure.NewCredentials() // Unix socket only (checked by New); access is the socket's mode.
	}
	if o.frames {
		return dialFrames(addr, kind, creds, handlers, ua), nil, nil
	}
	connect := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: 20 * time.Second}
	if kind == unixTarget {
		connect.Backoff = unixBackoff
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepaliveParams),
		grpc.WithConnectParams(connect),
		grpc.WithDefaultServiceConfig(serviceConfig),
	}
	for _, h := range handlers {
		dopts = append(dopts, grpc.WithStatsHandler(h))
	}
	dopts = append(dopts, o.dialOptions...)
	if ua != "" {
		dopts = append(dopts, grpc.WithUserAgent(ua)) // after WithDialOptions': the caller's wins
	}
	conn, err := grpc.NewClient(addr, dopts...)
	return conn, conn, err
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.name }

// Target returns the driver's address: the first target.
func (b *Backend) Target() string { return b.target }

// Targets returns the driver's addresses in failover order (a copy).
func (b *Backend) Targets() []string {
	out := make([]string, len(b.targets))
	for i, t := range b.targets {
		out[i] = t.addr
	}
	return out
}

// unary sends req (a request's protobuf wire bytes) to the driver as it is and returns the
// driver's response bytes as they are (nil for an empty message). It makes one attempt, plus
// one on each further target when a target's driver cannot be reached (see Backend).
//
// out is ctx with the caller's metadata as outgoing metadata (see outgoingContext), and a the
// agent of the caller's user-agent (agents.go; nil: the backend's own); ctx's deadline and
// cancellation apply to the call. When ctx is the context of the caller's grpc server stream,
// the driver's response header and trailer metadata are set on that stream with grpc.SetHeader
// and grpc.SetTrailer (also when the call fails). Errors are *backends.Error: the
// driver's status code gives the class and its message is kept, prefixed with the backend name;
// a driver that cannot be reached at any target is ClassUnavailable at once (calls do not wait
// for a connection).
func (b *Backend) unary(ctx, out context.Context, a *agent, method string, req []byte) ([]byte, error) {
	if b.closed.Load() {
		return nil, b.closedError(nil)
	}
	var resp []byte
	err := b.failover(ctx, a, func(t *target, calls grpc.ClientConnInterface) (string, error) {
		backends.CallInfoFrom(ctx).AddAttempt()
		var (
			header, trailer metadata.MD
			p               peer.Peer
			answer          rawcodec.Frame
		)
		opts := append(make([]grpc.CallOption, 0, 6), grpc.ForceCodecV2(rawcodec.Codec{}), grpc.WaitForReady(false),
			grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p))
		err := calls.Invoke(out, method, &rawcodec.Frame{Payload: req}, &answer, a.withOption(opts)...)
		relayResponseMetadata(ctx, header, trailer)
		if err != nil {
			reached := p.Addr != nil
			return unreached(ctx, err, reached), b.classify(ctx, t, err, reached, "")
		}
		resp = answer.Payload
		return "", nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Ready calls Identity/Probe on the targets, starting with the one calls go to, each bounded by
// the ready timeout (2 s by default; the caller's deadline applies too when it is earlier); a
// target whose connection is failing first tries to connect again (see wake). It
// returns nil at the first target whose driver answers OK and does not say ready=false, and
// makes that target the one calls go to; otherwise a *backends.Error saying, for every target,
// why not (ClassUnavailable for a driver that cannot be reached or is still starting).
func (b *Backend) Ready(ctx context.Context) error {
	if b.closed.Load() {
		return b.closedError(nil)
	}
	start := int(b.preferred.Load())
	var nr notReady
	for i := range b.targets {
		idx := (start + i) % len(b.targets)
		wake(ctx, b.targets[idx].conn) // report a driver that is back as soon as it is
		err := b.probe(ctx, b.targets[idx])
		if err == nil {
			b.prefer(start, idx, nr.reasons(b))
			return nil
		}
		nr.add(b.targets[idx], err)
		if ctx.Err() != nil {
			break
		}
	}
	return nr.err(b)
}

// probe asks one target's driver whether it is ready.
func (b *Backend) probe(ctx context.Context, t *target) *backends.Error {
	ctx, cancel := context.WithTimeout(ctx, b.readyTimeout)
	defer cancel()
	var p peer.Peer
	resp, err := csi.NewIdentityClient(t.calls).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(false), grpc.Peer(&p))
	if err != nil {
		return b.classify(ctx, t, err, p.Addr != nil, "Identity/Probe: ")
	}
	if r := resp.GetReady(); r != nil && !r.GetValue() {
		return b.newError(backends.ClassUnavailable, nil,
			"Identity/Probe: the driver at %s reports ready=false (still starting up?)", t.addr)
	}
	return nil
}

// Close closes the connections to the driver, the agents' too; calls in flight fail with
// ClassUnavailable, and so do calls made after Close. Close may be called more than once.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.closeErr = b.closeConns()
	})
	return b.closeErr
}

// closeConns closes every target's client and every agent.
func (b *Backend) closeConns() error {
	errs := []error{b.agents.close()}
	for _, t := range b.targets {
		errs = append(errs, t.calls.(io.Closer).Close()) // *grpc.ClientConn or *h2grpc.ClientConn
	}
	return errors.Join(errs...)
}
