package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// callGuard gives grpc-go's server the two limits it lacks and h2grpc has in its transport:
// a call's first request message must arrive within firstMessage of its headers, and each
// SendMsg may wait at most write for a caller that does not read. grpc-go unblocks a
// handler's RecvMsg or SendMsg only when the stream's context ends, and that context is
// fixed before the handler runs, so the guard takes part twice: its InTapHandle (tap) makes
// the stream's context one it can cancel, and the handler it wraps (guard) arms and stops
// the timers that cancel it. A call it ends gets DEADLINE_EXCEEDED naming the limit.
type callGuard struct {
	firstMessage, write time.Duration
}

type guardKey struct{}

// guardedCall is one call's timers and the cancel of its stream's context.
type guardedCall struct {
	g      callGuard
	cancel context.CancelFunc

	mu         sync.Mutex
	first      *time.Timer // nil once the first message arrived
	writeTimer *time.Timer // made by the first SendMsg
	expired    string      // the limit that ended the call, if one did
}

// tap runs as the stream is created, before the stream's reads are bound to its context:
// it makes that context cancellable and arms the first-message timer.
func (g callGuard) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithCancel(ctx)
	c := &guardedCall{g: g, cancel: cancel}
	c.mu.Lock()
	c.first = time.AfterFunc(g.firstMessage, func() {
		c.expire(fmt.Sprintf("csi-gateway: no request message within %v of the call's headers (limits.firstMessageTimeout)", g.firstMessage))
	})
	c.mu.Unlock()
	return context.WithValue(ctx, guardKey{}, c), nil
}

// guard wraps the server's handler: its stream's RecvMsg stops the first-message timer,
// its SendMsg runs under the write timer, and the timers are stopped when it returns.
func (g callGuard) guard(h grpc.StreamHandler) grpc.StreamHandler {
	return func(srv any, ss grpc.ServerStream) error {
		c, ok := ss.Context().Value(guardKey{}).(*guardedCall)
		if !ok {
			return h(srv, ss)
		}
		defer c.stop()
		return c.explain(h(srv, &guardedStream{ServerStream: ss, c: c}))
	}
}

// expire ends the call: a limit passed, which msg names.
func (c *guardedCall) expire(msg string) {
	c.mu.Lock()
	if c.expired == "" {
		c.expired = msg
	}
	c.mu.Unlock()
	c.cancel()
}

// explain turns the error of a call the guard ended into DEADLINE_EXCEEDED naming the limit.
func (c *guardedCall) explain(err error) error {
	if err == nil {
		return nil
	}
	c.mu.Lock()
	msg := c.expired
	c.mu.Unlock()
	if msg == "" {
		return err
	}
	return status.Error(codes.DeadlineExceeded, msg)
}

// received stops the first-message timer.
func (c *guardedCall) received() {
	c.mu.Lock()
	if c.first != nil {
		c.first.Stop()
		c.first = nil
	}
	c.mu.Unlock()
}

// stop stops both timers; the call is over.
func (c *guardedCall) stop() {
	c.received()
	c.mu.Lock()
	if c.writeTimer != nil {
		c.writeTimer.Stop()
	}
	c.mu.Unlock()
}

// guardedStream is the stream the guarded handler sees.
type guardedStream struct {
	grpc.ServerStream
	c *guardedCall
}

func (s *guardedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	s.c.received() // a message, or the end of the caller's side, or the end of the call
	return s.c.explain(err)
}

func (s *guardedStream) SendMsg(m any) error {
	c := s.c
	c.mu.Lock()
	if c.writeTimer == nil {
		c.writeTimer = time.AfterFunc(c.g.write, func() {
			c.expire(fmt.Sprintf("csi-gateway: the caller read nothing of the answer for %v (limits.writeTimeout)", c.g.write))
		})
	} else {
		c.writeTimer.Reset(c.g.write)
	}
	c.mu.Unlock()
	err := s.ServerStream.SendMsg(m)
	c.mu.Lock()
	c.writeTimer.Stop()
	c.mu.Unlock()
	return c.explain(err)
}
