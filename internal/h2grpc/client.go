package h2grpc

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// userAgentToken ends the user-agent of every call, as grpc-go appends "grpc-go/<version>"
// to the one given with grpc.WithUserAgent.
const userAgentToken = "grpc-go-h2grpc/1"

// defaultDialTimeout bounds connecting (dial, handshake, the server's SETTINGS) when the
// call's context has no deadline.
const defaultDialTimeout = 20 * time.Second

var errClientConnClosing = status.Error(codes.Canceled, "grpc: the client connection is closing")

// ClientConfig is a ClientConn's configuration. Dial and Creds are required.
type ClientConfig struct {
	// Dial makes the raw connection (unix or tcp); its context is the first call's.
	Dial func(ctx context.Context) (net.Conn, error)
	// Creds makes the client handshake (TLS with ALPN h2, or insecure) for Authority.
	Creds credentials.TransportCredentials
	// Authority is the :authority of every call (e.g. "localhost").
	Authority string
	// Codec marshals messages unless a call forces another (grpc.ForceCodecV2); nil means
	// grpc's proto codec. Its name becomes the content-subtype ("application/grpc+proto").
	Codec encoding.CodecV2
	// StatsHandlers see each call as grpc-go's client reports it: TagRPC before the request
	// headers are built (so otelgrpc can inject its trace context into the outgoing
	// metadata), then Begin, OutHeader, OutPayload, InHeader, InPayload, InTrailer, End.
	StatsHandlers []stats.Handler
	// MaxRecvMsgSize bounds a response message (default 4 MiB); grpc.MaxCallRecvMsgSize
	// overrides it per call.
	MaxRecvMsgSize int
	// UserAgent is the user-agent of every call, followed by the client's own token
	// ("grpc-go-h2grpc/1") as grpc.WithUserAgent does; CallUserAgent replaces it for one
	// call. Empty: the token alone. Like metadata values, it must be printable ASCII.
	UserAgent string
}

// ClientConn multiplexes calls over one HTTP/2 connection, made on the first call and made
// again on the first call after it broke or got GOAWAY (there is no background reconnection:
// a connection that cannot be made fails the call with Unavailable at once, as
// grpc.WaitForReady(false) does). It is safe for concurrent use.
type ClientConn struct {
	cfg    ClientConfig
	codec  encoding.CodecV2
	sh     statsHandlers
	scheme string
	agent  string // the user-agent header of calls without CallUserAgent

	dialSem chan struct{} // one dial at a time

	mu     sync.Mutex
	cur    *clientTransport
	all    map[*clientTransport]struct{}
	closed bool
	wg     sync.WaitGroup // reader goroutines
}

var _ grpc.ClientConnInterface = (*ClientConn)(nil)

// NewClientConn returns a ClientConn for cfg; it does not connect until the first call.
func NewClientConn(cfg ClientConfig) *ClientConn {
	positiveOr(&cfg.MaxRecvMsgSize, defaultMaxRecvMsgSize)
	cc := &ClientConn{
		cfg:     cfg,
		codec:   codecOrProto(cfg.Codec),
		sh:      statsHandlers(cfg.StatsHandlers),
		scheme:  "http",
		agent:   joinUserAgent(cfg.UserAgent),
		dialSem: make(chan struct{}, 1),
		all:     make(map[*clientTransport]struct{}),
	}
	if cfg.Creds != nil && cfg.Creds.Info().SecurityProtocol == "tls" {
		cc.scheme = "https"
	}
	return cc
}

var unaryDesc = grpc.StreamDesc{}

// Invoke makes a unary call: the request headers and message leave in one write, and the
// caller's goroutine waits for the response without any other goroutine being involved.
// Errors are status errors as grpc-go's (see the package documentation for the mapping).
func (cc *ClientConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	cs, err := cc.newClientStream(ctx, &unaryDesc, method, opts)
	if err != nil {
		return err
	}
	err = cs.sendUnary(args)
	if err == nil {
		err = cs.recvUnary(reply)
	}
	cs.finish(err)
	return err
}

// NewStream starts a streaming call; its headers are sent at once (flushed with the first
// message when it follows right away). As with grpc-go, the caller must cancel ctx, or call
// RecvMsg until it returns an error, or Close the ClientConn, to release the stream.
func (cc *ClientConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := cc.newClientStream(ctx, desc, method, opts)
	if err != nil {
		return nil, err
	}
	if err := cs.start(); err != nil {
		cs.finish(err)
		return nil, err
	}
	return cs, nil
}

// Close closes every connection: calls in flight fail with Unavailable, later calls with
// Canceled. It waits for the connections' reader goroutines to end.
func (cc *ClientConn) Close() error {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return nil
	}
	cc.closed = true
	cc.cur = nil
	list := make([]*clientTransport, 0, len(cc.all))
	for ct := range cc.all {
		list = append(list, ct)
	}
	cc.mu.Unlock()
	for _, ct := range list {
		ct.nc.Close()
	}
	cc.wg.Wait()
	return nil
}

// transport returns the current connection, making one when there is none usable. Only one
// goroutine dials at a time; the others wait for it (or for their context).
func (cc *ClientConn) transport(ctx context.Context) (*clientTransport, error) {
	if ct := cc.current(); ct != nil {
		return ct, nil
	}
	select {
	case cc.dialSem <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-cc.dialSem }()
	cc.mu.Lock()
	closed := cc.closed
	cc.mu.Unlock()
	if closed {
		return nil, errClientConnClosing
	}
	if ct := cc.current(); ct != nil {
		return ct, nil
	}
	ct, err := cc.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unavailable, "connection error: %v", err)
	}
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		ct.nc.Close()
		return nil, errClientConnClosing
	}
	cc.cur = ct
	cc.all[ct] = struct{}{}
	cc.wg.Add(1)
	cc.mu.Unlock()
	go ct.readLoop()
	return ct, nil
}

func (cc *ClientConn) current() *clientTransport {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.cur != nil && cc.cur.usable() {
		return cc.cur
	}
	return nil
}

// dial connects, makes the handshake, exchanges the prefaces and reads the server's first
// SETTINGS, all within ctx (or defaultDialTimeout).
func (cc *ClientConn) dial(ctx context.Context) (*clientTransport, error) {
	if cc.cfg.Dial == nil || cc.cfg.Creds == nil {
		return nil, errors.New("h2grpc: ClientConfig.Dial and Creds are required")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultDialTimeout)
		defer cancel()
	}
	raw, err := cc.cfg.Dial(ctx)
	if err != nil {
		return nil, err
	}
	nc, auth, err := cc.cfg.Creds.ClientHandshake(ctx, cc.cfg.Authority, raw)
	if err != nil {
		raw.Close()
		return nil, err
	}
	ct := newClientTransport(cc, nc, auth)
	dl, _ := ctx.Deadline()
	_ = nc.SetReadDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetReadDeadline(time.Unix(1, 0)) })
	err = ct.handshake()
	if !stop() && err == nil {
		err = context.Cause(ctx) // ctx ended: the deadline set by AfterFunc may outlive us
	}
	_ = nc.SetReadDeadline(time.Time{})
	if err != nil {
		nc.Close()
		ct.w.stop()
		return nil, err
	}
	return ct, nil
}

func (cc *ClientConn) forget(ct *clientTransport) {
	cc.mu.Lock()
	delete(cc.all, ct)
	if cc.cur == ct {
		cc.cur = nil
	}
	cc.mu.Unlock()
}
