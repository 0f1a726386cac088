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
// the timer that cancels it. A call it ends gets DEADLINE_EXCEEDED naming the limit. One timer
// serves both limits: a handler that sends before its first request message arrived (a
// forwarded stream whose backend speaks first) trades the first-message bound for the write
// bound, which is what ends a stream then; every CSI method receives its request first.
type callGuard struct {
	firstMessage, write time.Duration
}

type guardKey struct{}

// guardPhase is what a guarded call's timer is armed for.
type guardPhase uint8

const (
	guardIdle         guardPhase = iota
	guardFirstMessage            // waiting for the first request message
	guardWrite                   // in SendMsg
)

// guardedCall is one call's timer, the cancel of its stream's context, and (once the handler
// runs) the stream the handler sees.
type guardedCall struct {
	grpc.ServerStream
	g      callGuard
	cancel context.CancelFunc

	mu       sync.Mutex
	timer    *time.Timer // one timer for both phases, Reset from one to the other
	phase    guardPhase
	deadline time.Time // of the phase: a late firing of an earlier phase is ignored
	expired  string    // the limit that ended the call, if one did
}

// tap runs as the stream is created, before the stream's reads are bound to its context:
// it makes that context cancellable and arms the first-message timer.
func (g callGuard) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithCancel(ctx)
	c := &guardedCall{g: g, cancel: cancel}
	c.mu.Lock()
	c.phase, c.deadline = guardFirstMessage, time.Now().Add(g.firstMessage)
	c.timer = time.AfterFunc(g.firstMessage, c.fire)
	c.mu.Unlock()
	return context.WithValue(ctx, guardKey{}, c), nil
}

// guard wraps the server's handler: the handler's stream is the call's guardedCall, whose
// RecvMsg disarms the first-message timer and whose SendMsg runs under the write timer; the
// timer is stopped when the handler returns.
func (g callGuard) guard(h grpc.StreamHandler) grpc.StreamHandler {
	return func(srv any, ss grpc.ServerStream) error {
		c, ok := ss.Context().Value(guardKey{}).(*guardedCall)
		if !ok {
			return h(srv, ss)
		}
		c.ServerStream = ss
		defer c.disarm()
		return c.explain(h(srv, c))
	}
}

// fire ends the call if its timer's phase is still on and past its deadline.
func (c *guardedCall) fire() {
	c.mu.Lock()
	if c.phase == guardIdle || time.Now().Before(c.deadline) || c.expired != "" {
		c.mu.Unlock()
		return
	}
	if c.phase == guardFirstMessage {
		c.expired = fmt.Sprintf("csi-gateway: no request message within %v of the call's headers (limits.firstMessageTimeout)", c.g.firstMessage)
	} else {
		c.expired = fmt.Sprintf("csi-gateway: the caller read nothing of the answer for %v (limits.writeTimeout)", c.g.write)
	}
	c.mu.Unlock()
	c.cancel()
}

// arm starts phase p, to end after d.
func (c *guardedCall) arm(p guardPhase, d time.Duration) {
	c.mu.Lock()
	c.phase, c.deadline = p, time.Now().Add(d)
	c.timer.Reset(d)
	c.mu.Unlock()
}

// disarm ends the current phase.
func (c *guardedCall) disarm() {
	c.mu.Lock()
	c.phase = guardIdle
	c.timer.Stop()
	c.mu.Unlock()
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

// RecvMsg receives a message; the first one, the end of the caller's side or the end of the
// call disarms the first-message timer.
func (c *guardedCall) RecvMsg(m any) error {
	err := c.ServerStream.RecvMsg(m)
	c.mu.Lock()
	if c.phase == guardFirstMessage {
		c.phase = guardIdle
		c.timer.Stop()
	}
	c.mu.Unlock()
	return c.explain(err)
}

// SendMsg sends a message under the write timer.
func (c *guardedCall) SendMsg(m any) error {
	c.arm(guardWrite, c.g.write)
	err := c.ServerStream.SendMsg(m)
	c.disarm()
	return c.explain(err)
}
