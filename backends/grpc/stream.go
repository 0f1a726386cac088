package grpcbackend

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/mwitkow/grpc-proxy/proxy"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// stream forwards one call of any shape (server streams such as
// csi.v1.SnapshotMetadata/GetMetadataAllocated, bidi streams, methods of services the gateway
// does not know) frame by frame between caller and the driver, with github.com/mwitkow/grpc-proxy.
// Frames are relayed as *emptypb.Empty values whose unknown fields hold the bytes, so they reach
// the other side unchanged; the driver's header metadata goes to caller before its first response
// frame, and its trailer metadata with the end of the call.
//
// ctx must be caller's context or derived from it: its deadline and cancellation end the call
// to the driver; out and a carry its metadata and user-agent, as in unary. method is the full
// method name ("/service/method") called on the driver. caller must not have been read from
// yet. One attempt is counted per target tried: a stream fails over to the next target only when it could not
// be opened because the driver cannot be reached, before any frame was read or sent (see
// Backend). Errors are *backends.Error, classified like in Unary; a call cut short because the
// caller went away is ClassCanceled (ClassDeadline when its deadline passed).
func (b *Backend) stream(ctx, out context.Context, a *agent, method string, caller grpc.ServerStream) error {
	if b.closed.Load() {
		return b.closedError(nil)
	}
	return b.failover(ctx, a, func(t *target, calls grpc.ClientConnInterface) (string, error) {
		backends.CallInfoFrom(ctx).AddAttempt()
		conn := &watchedConn{conn: calls, agent: a}
		in := &watchedCaller{
			ServerStream: caller,
			// grpc-proxy reads the method from the stream's context; this makes it the method
			// asked for, and lets caller be any ServerStream (a wrapped one, too).
			ctx: grpc.NewContextWithServerTransportStream(ctx, methodStream{caller, method}),
		}
		director := func(context.Context, string) (context.Context, grpc.ClientConnInterface, error) {
			return out, conn, nil
		}
		err := proxy.TransparentHandler(director)(nil, in)
		if err == nil {
			return "", nil
		}
		why := ""
		// grpc-proxy opens the stream to the driver before it touches caller: when that
		// failed, no frame went either way and the next target may have the call.
		if !conn.reached.Load() && in.err() == nil {
			why = unreached(ctx, err, false)
		}
		return why, b.classifyStream(ctx, t, err, conn, in)
	})
}

// classifyStream classifies what grpc-proxy's handler returned for the stream to t: the
// driver's status (or a failure to open the stream), or its own "failed proxying s2c" INTERNAL
// error when reading from the caller or writing to the driver failed.
func (b *Backend) classifyStream(ctx context.Context, t *target, err error, conn *watchedConn, in *watchedCaller) *backends.Error {
	// A request the caller's server refused (too large, say) ends the caller's call with that
	// status, which cancels the caller's context and so the call to the driver: whichever side
	// grpc-proxy heard from first, the refused request is the reason.
	if rerr := in.err(); rerr != nil {
		if c := status.Code(rerr); c != codes.Canceled && c != codes.DeadlineExceeded {
			return b.newError(classOfErr(rerr), err, "reading the caller's request: %s", status.Convert(rerr).Message())
		}
	}
	st := status.Convert(err)
	if st.Code() != codes.Internal || !strings.HasPrefix(st.Message(), "failed proxying s2c") {
		return b.classify(ctx, t, err, conn.reached.Load(), "")
	}
	if cerr := firstErr(ctx.Err(), in.ServerStream.Context().Err()); cerr != nil {
		class := backends.ClassCanceled
		if errors.Is(cerr, context.DeadlineExceeded) {
			class = backends.ClassDeadline
		}
		return b.newError(class, err, "the caller went away before the call ended (%v)", cerr)
	}
	if serr := conn.err(); serr != nil {
		return b.newError(classOfErr(serr), err, "sending the request to the driver: %s", status.Convert(serr).Message())
	}
	return b.classify(ctx, t, err, conn.reached.Load(), "")
}

// classOfErr is the class of a status error; ClassInternal for an error that carries no status.
func classOfErr(err error) backends.Class {
	if st, ok := status.FromError(err); ok {
		return backends.ClassFromCode(st.Code())
	}
	return backends.ClassOf(err)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// methodStream is the grpc.ServerTransportStream grpc-proxy finds in the caller's context: it
// names the method and passes metadata on to the caller's stream.
type methodStream struct {
	s      grpc.ServerStream
	method string
}

func (m methodStream) Method() string                  { return m.method }
func (m methodStream) SetHeader(md metadata.MD) error  { return m.s.SetHeader(md) }
func (m methodStream) SendHeader(md metadata.MD) error { return m.s.SendHeader(md) }
func (m methodStream) SetTrailer(md metadata.MD) error { m.s.SetTrailer(md); return nil }

// watchedCaller is the caller's stream as grpc-proxy sees it; it remembers why reading from the
// caller failed, which grpc-proxy reports only as text.
type watchedCaller struct {
	grpc.ServerStream
	ctx context.Context

	recvMu  sync.Mutex // held while RecvMsg runs
	mu      sync.Mutex // guards recvErr
	recvErr error
}

func (w *watchedCaller) Context() context.Context { return w.ctx }

func (w *watchedCaller) RecvMsg(m any) error {
	w.recvMu.Lock()
	defer w.recvMu.Unlock()
	err := w.ServerStream.RecvMsg(m)
	if err != nil && err != io.EOF {
		w.mu.Lock()
		w.recvErr = err
		w.mu.Unlock()
	}
	return err
}

// err returns the error reading from the caller failed with, if any. grpc-proxy may return
// before its reading goroutine has reported: when the caller's call has ended, that read ends
// at once, so err waits for it; otherwise it does not wait (a live caller may never send again).
func (w *watchedCaller) err() error {
	if w.ServerStream.Context().Err() != nil {
		w.recvMu.Lock()
		defer w.recvMu.Unlock()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recvErr
}

// watchedConn is the connection as grpc-proxy sees it; it records whether the stream reached the
// driver and why sending to it failed.
type watchedConn struct {
	conn    grpc.ClientConnInterface
	agent   *agent // its call option goes with the stream
	reached atomic.Bool

	mu      sync.Mutex
	sendErr error
}

func (c *watchedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.conn.Invoke(ctx, method, args, reply, opts...)
}

func (c *watchedConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := c.conn.NewStream(ctx, desc, method, c.agent.withOption(append(opts, grpc.WaitForReady(false)))...)
	if err != nil {
		return nil, err
	}
	// NewStream returns only once the stream's headers went to a connection: the driver was
	// reached.
	c.reached.Store(true)
	return &watchedClientStream{ClientStream: s, conn: c}, nil
}

func (c *watchedConn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendErr
}

type watchedClientStream struct {
	grpc.ClientStream
	conn *watchedConn
}

func (s *watchedClientStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		s.conn.mu.Lock()
		s.conn.sendErr = err
		s.conn.mu.Unlock()
	}
	return err
}
