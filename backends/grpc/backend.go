package grpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-gateway/csi-gateway/backends"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Backend forwards calls to one CSI driver over one gRPC connection. It is safe for concurrent
// use. New returns it unconnected; the connection is made by the first call and remade, with
// backoff, whenever it breaks. Close releases it.
type Backend struct {
	name         string
	target       string
	conn         *grpc.ClientConn
	readyTimeout time.Duration

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ backends.Backend = (*Backend)(nil)

// Keepalive: on a Unix socket a dead peer is reported by the kernel at once, so pings only
// matter for TCP targets. Five minutes is the most frequent ping a grpc server accepts by
// default (its keepalive.EnforcementPolicy.MinTime); pinging faster makes drivers with default
// settings close the connection with ENHANCE_YOUR_CALM ("too_many_pings").
var keepaliveParams = keepalive.ClientParameters{Time: 5 * time.Minute, Timeout: 20 * time.Second}

// unixBackoff is grpc's default connect backoff (1 s, ×1.6, ±20 %) with the ceiling lowered
// from 120 s to 10 s: a connect(2) on a local socket costs nothing, and a driver restarted by
// its supervisor should get calls again within seconds, not minutes. TCP targets keep grpc's
// default.
var unixBackoff = backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 10 * time.Second}

// serviceConfig is the default service config: pick_first over the target's one address, and no
// retryPolicy, because retrying is the gateway's decision (it knows which CSI calls are safe to
// repeat); grpc still retries transparently a call that never reached the driver.
const serviceConfig = `{"loadBalancingConfig": [{"pick_first": {}}]}`

// New returns the backend called name (the key under backends: in the config, used in error
// messages) for the driver at cfg.Target. It checks the target and credentials but does not
// connect: a driver that is not up yet is not an error here (see Ready).
func New(name string, cfg Config, opts ...Option) (*Backend, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	kind, err := parseTarget(name, cfg.Target)
	if err != nil {
		return nil, err
	}
	if err := checkCredentials(name, cfg.Target, kind, o.creds); err != nil {
		return nil, err
	}
	creds := o.creds
	if creds == nil {
		creds = insecure.NewCredentials() // Unix socket only (checked above); access is the socket's mode.
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
	if o.tracerProvider != nil {
		dopts = append(dopts, grpc.WithStatsHandler(newClientTracing(name, o.tracerProvider, o.propagator)))
	}
	dopts = append(dopts, o.dialOptions...)
	conn, err := grpc.NewClient(cfg.Target, dopts...)
	if err != nil {
		return nil, fmt.Errorf("backends.%s: %w", name, err)
	}
	return &Backend{name: name, target: cfg.Target, conn: conn, readyTimeout: o.readyTimeout}, nil
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.name }

// Target returns the driver's address.
func (b *Backend) Target() string { return b.target }

// Unary sends req (a request's protobuf wire bytes) to the driver as it is, in one attempt, and
// returns the driver's response bytes as they are (nil for an empty message).
//
// The caller's incoming metadata in ctx goes to the driver (see outgoingContext), and ctx's
// deadline and cancellation apply to the call. When ctx is the context of the caller's grpc
// server stream, the driver's response header and trailer metadata are set on that stream with
// grpc.SetHeader and grpc.SetTrailer (also when the call fails). Errors are *backends.Error: the
// driver's status code gives the class and its message is kept, prefixed with the backend name;
// a driver that cannot be reached is ClassUnavailable at once (calls do not wait for the
// connection).
func (b *Backend) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	if b.closed.Load() {
		return nil, b.closedError(nil)
	}
	backends.CallInfoFrom(ctx).AddAttempt()
	var (
		header, trailer metadata.MD
		p               peer.Peer
		out             Frame
	)
	err := b.conn.Invoke(outgoingContext(ctx), method, &Frame{Payload: req}, &out,
		grpc.ForceCodecV2(Codec{}), grpc.WaitForReady(false),
		grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p))
	relayResponseMetadata(ctx, header, trailer)
	if err != nil {
		return nil, b.classify(ctx, err, p.Addr != nil, "")
	}
	return out.Payload, nil
}

// Ready calls Identity/Probe, bounded by the ready timeout (2 s by default). It returns nil when
// the driver answers OK and does not say ready=false; otherwise a *backends.Error saying why
// (ClassUnavailable for a driver that cannot be reached or is still starting).
func (b *Backend) Ready(ctx context.Context) error {
	if b.closed.Load() {
		return b.closedError(nil)
	}
	ctx, cancel := context.WithTimeout(ctx, b.readyTimeout)
	defer cancel()
	var p peer.Peer
	resp, err := csi.NewIdentityClient(b.conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(false), grpc.Peer(&p))
	if err != nil {
		return b.classify(ctx, err, p.Addr != nil, "Identity/Probe: ")
	}
	if r := resp.GetReady(); r != nil && !r.GetValue() {
		return b.newError(backends.ClassUnavailable, nil,
			"Identity/Probe: the driver at %s reports ready=false (still starting up?)", b.target)
	}
	return nil
}

// Close closes the connection to the driver; calls in flight fail with ClassUnavailable, and so
// do calls made after Close. Close may be called more than once.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.closeErr = b.conn.Close()
	})
	return b.closeErr
}
