package grpcbackend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/backends"
)

// The backend's circuit breaker (backends.Breaker), one per backend: it wraps Unary and
// Stream, after failover across the targets has had its say, so that a driver gone from every
// target is not asked again and again. Ready is not guarded: it reports what the driver says,
// and so /readyz says why the circuit is open.

// breakerOptions are the breaker's settings among the options.
type breakerOptions struct {
	cfg backends.BreakerConfig
	now func() time.Time // nil: time.Now; tests set a fake clock
}

// WithCircuitBreaker sets the backend's circuit breaker (backends.NAME.circuitBreaker): zero
// fields of cfg take the defaults of backends.BreakerConfig (open after 5 transient failures in
// a row, fail fast for 1 s, doubling while trial calls fail, up to 30 s: the Default* constants
// there); cfg.Disable turns it off. New reports invalid settings.
func WithCircuitBreaker(cfg backends.BreakerConfig) Option {
	return func(o *options) { o.breaker.cfg = cfg }
}

// newBreaker checks the breaker's settings and makes it; nil when disabled.
func newBreaker(name string, o breakerOptions) (*backends.Breaker, error) {
	cfg, err := o.cfg.WithDefaults()
	if err != nil {
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for i, e := range errs {
			errs[i] = fmt.Errorf("backends.%s.circuitBreaker.%w", name, e)
		}
		return nil, errors.Join(errs...)
	}
	br := backends.NewBreaker(name, "", cfg)
	if br != nil && o.now != nil {
		br.SetClock(o.now)
	}
	return br, nil
}

// Unary sends one unary call to the driver, as unary describes, unless the backend's circuit
// is open: then it fails at once with a ClassUnavailable *backends.Error ("backend "NAME":
// circuit open after 5 consecutive failures; retrying in 5s") and sends nothing.
func (b *Backend) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	out, a := b.forwarding(ctx)
	defer b.agents.release(a)
	permit, err := b.admit(ctx, a)
	if err != nil {
		return nil, err
	}
	resp, err := b.unary(ctx, out, a, method, req)
	b.settle(permit, err)
	return resp, err
}

// Stream forwards one call of any shape to the driver, as stream describes, unless the
// backend's circuit is open: then it fails at once like Unary, without touching caller.
// The outcome is reported to the breaker when the stream ends.
func (b *Backend) Stream(ctx context.Context, method string, caller grpc.ServerStream) error {
	out, a := b.forwarding(ctx)
	defer b.agents.release(a)
	permit, err := b.admit(ctx, a)
	if err != nil {
		return err
	}
	err = b.stream(ctx, out, a, method, caller)
	b.settle(permit, err)
	return err
}

// Breakers returns the backend's circuit breaker, for metrics and readiness; nil when it is
// disabled.
func (b *Backend) Breakers() []*backends.Breaker {
	if b.breaker == nil {
		return nil
	}
	return []*backends.Breaker{b.breaker}
}

var _ backends.BreakerReporter = (*Backend)(nil)

// admit asks the breaker whether a call may go. A call on a closed backend, or whose caller
// has already gone, is let through without a permit: it fails before reaching the driver,
// with its own error, and says nothing about the driver.
//
// The trial call after a cool-down first wakes the connection it goes over, agent a's at the
// target calls go to (wake): grpc's reconnect backoff (up to 5 s for a socket, 2 min for TCP)
// would otherwise fail the trial at once although the driver may be back, and keep the
// circuit open for longer.
func (b *Backend) admit(ctx context.Context, a *agent) (backends.Permit, error) {
	if b.closed.Load() || ctx.Err() != nil {
		return backends.Permit{}, nil
	}
	p, err := b.breaker.Admit()
	if err == nil && p.Trial() {
		_, conn := a.over(b.targets[int(b.preferred.Load())%len(b.targets)])
		wake(ctx, conn)
	}
	return p, err
}

// settle reports a call's outcome: a transient class (the driver unreachable at every target,
// or too slow) is a failure, the caller going away nothing, any other answer a success. The
// backend being closed under the call says nothing about the driver.
func (b *Backend) settle(p backends.Permit, err error) {
	if b.closed.Load() {
		p.Release()
		return
	}
	p.Done(err)
}
