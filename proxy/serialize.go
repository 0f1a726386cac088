package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/workers"
	"github.com/csi-gateway/csi-gateway/redact"
)

// Serializer is the table of operations in flight on each volume, snapshot and group, for
// one gateway replica (every listener of a Server shares one). The CSI spec leaves "one call
// in flight per volume" to the CO but lets a plugin answer ABORTED when a CO that lost its
// state sends more; the Serializer does that gracefully:
//
//   - a call identical to one in flight (same method, same request) joins it: the backend is
//     called once and every caller gets the same answer;
//   - a different call on the same object while one is in flight gets ABORTED, naming the
//     operation in flight (the spec's recovery for ABORTED is to retry with backoff).
//
// Objects are keyed by the names and IDs the caller sent, per tenant: a tenant's calls are
// serialized among themselves, apart from other tenants' and from callers of no tenant.
//
// It is safe for concurrent use. Replicas of a shared gateway also lock each flight's object
// in the tenancy ledger's store (lockAcrossReplicas); other replicas do not coordinate: the
// CSI sidecars elect one leader, so one replica sees a volume's calls.
type Serializer struct {
	mu      sync.Mutex
	objects map[string][]*flight // key → the operations in flight on that object
	flights *workers.Pool        // runs each flight's backend call
}

// flightWorkerIdle is how long a goroutine that ran a flight is kept for the next one.
const flightWorkerIdle = 30 * time.Second

// NewSerializer returns an empty in-flight table.
func NewSerializer() *Serializer {
	return &Serializer{objects: map[string][]*flight{}, flights: workers.New(flightWorkerIdle)}
}

// InFlight returns how many operations are in flight: backend calls running, or being
// cancelled because every caller has gone.
func (s *Serializer) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, fs := range s.objects {
		n += len(fs)
	}
	return n
}

// flight is one backend call shared by every caller that joined it.
//
// It runs on a context detached from the caller that started it (context.WithoutCancel:
// same values, so the same trace and identity, but not its cancellation), so the first
// caller going away does not fail the others; and it is cancelled when its last waiting
// caller has gone, so it runs no longer than someone wants its answer.
//
// It keeps its first caller's deadline, because the deadline is part of the call: it reaches
// the backend (grpc-timeout, Connect-Timeout-Ms) and bounds the backend's retries. A caller
// that joined with a later deadline is not failed by a call cut short for someone else:
// when the flight fails at its deadline, that caller makes the call again (or joins the
// caller that already did), within its own deadline.
type flight struct {
	operation
	ctx      context.Context
	cancel   context.CancelFunc
	deadline time.Time          // zero: none
	info     *backends.CallInfo // the shared call's attempts

	// Guarded by Serializer.mu.
	waiters   int
	abandoned bool // every waiter has gone; the call is being cancelled

	done     chan struct{} // closed when the fields below are set
	resp     []byte
	err      error
	backend  string
	repaired *repair     // what the gateway changed in the backend's answer
	expired  bool        // it ended at (or within deadlineSlack of) its deadline
	credited atomic.Bool // the attempts have been added to one caller's CallInfo
}

// serialize is the server's serialization middleware, on the server's Serializer; a shared
// gateway (with a tenancy ledger) also locks each flight's object in the ledger's store, for
// its replicas (lockAcrossReplicas).
func (s *Server) serialize() Middleware {
	inProcess := serializeCalls(s.serializer(), s.opts.Log, s.redactor)
	if s.opts.Tenancy == nil {
		return inProcess
	}
	acrossReplicas := lockAcrossReplicas(s.opts.Tenancy, s.opts.Metrics, s.redactor)
	return func(next Handler) Handler { return inProcess(acrossReplicas(next)) }
}

// serializer returns the server's Serializer (Options.Serializer), made on first use.
func (s *Server) serializer() *Serializer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Serializer == nil {
		s.opts.Serializer = NewSerializer()
	}
	return s.opts.Serializer
}

// serializeCalls serializes the calls that operationOf recognises on sz; every other call
// passes straight through. The backend call of a flight runs on its own goroutine, under its
// own panic recovery (logged to log); r scrubs the refused call's secret values from ABORTED
// messages.
//
// It belongs inside confine and validation (a refused call never joins or blocks anything)
// and the deadline limits (a flight carries a limited deadline); outside tenant scoping, so
// that identical calls of a tenant are one call before tenancy takes a quota hold for it (ten
// identical creates in flight hold the quota once, not ten times); and outside canonicalize,
// so the answer shared by joined callers is already the final status. Its keys carry the
// caller's tenant (objectKey): two tenants' calls never join nor refuse each other.
func serializeCalls(sz *Serializer, log *slog.Logger, r *redact.Redactor) Middleware {
	return func(next Handler) Handler {
		run := recoverPanics(log)(next)
		return func(ctx context.Context, call *Call) error {
			op, ok := operationOf(call, auth.TenantFromContext(ctx))
			if !ok {
				return next(ctx, call)
			}
			return sz.do(ctx, call, &op, run, r)
		}
	}
}

// do joins the flight identical to op, starts a new one, or refuses op, and then waits.
func (s *Serializer) do(ctx context.Context, call *Call, op *operation, run Handler, r *redact.Redactor) error {
	for {
		if ctx.Err() != nil {
			return stoppedWaiting(ctx, op)
		}
		s.mu.Lock()
		f := s.overlapping(op)
		switch {
		case f == nil:
			f = s.start(ctx, op)
			s.mu.Unlock()
			s.flights.Go(func() { s.run(f, call, run) })
		case !f.identical(op):
			s.mu.Unlock()
			return aborted(call, op, f, r)
		case f.abandoned:
			// The same request, whose callers have all gone: its backend call is being
			// cancelled. Wait for it to end, then start afresh, so the backend never has
			// two calls on one object from this replica.
			s.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
			}
			continue
		default:
			f.waiters++
			s.mu.Unlock()
		}
		if err := s.wait(ctx, call, f); !errors.Is(err, errFlightExpired) {
			return err
		}
	}
}

// overlapping returns the flight op overlaps, or nil. The flights on one key never overlap
// each other, so there is at most one. s.mu must be held.
func (s *Serializer) overlapping(op *operation) *flight {
	for _, f := range s.objects[op.key] {
		if f.overlaps(op) {
			return f
		}
	}
	return nil
}

// start records a new flight for op, with the caller as its one waiter. s.mu must be held.
func (s *Serializer) start(ctx context.Context, op *operation) *flight {
	f := &flight{operation: *op, waiters: 1, done: make(chan struct{})}
	f.ctx, f.info = backends.WithCallInfo(context.WithoutCancel(ctx))
	if dl, ok := ctx.Deadline(); ok {
		f.deadline = dl
		f.ctx, f.cancel = context.WithDeadline(f.ctx, dl)
	} else {
		f.ctx, f.cancel = context.WithCancel(f.ctx)
	}
	s.objects[op.key] = append(s.objects[op.key], f)
	return f
}

// run makes the flight's backend call on a Call of its own (the callers' Calls each belong
// to their caller's goroutine), then removes the flight and hands out the answer.
func (s *Serializer) run(f *flight, call *Call, h Handler) {
	shared := &Call{Method: call.Method, Start: call.Start, Request: call.Request, info: call.info, decodedBy: call, redactor: call.redactor}
	f.info.SetScrubber(shared)
	err := h(f.ctx, shared)
	expired := !f.deadline.IsZero() && time.Until(f.deadline) < deadlineSlack
	f.cancel()

	s.mu.Lock()
	fs := slices.DeleteFunc(s.objects[f.key], func(g *flight) bool { return g == f })
	if len(fs) == 0 {
		delete(s.objects, f.key)
	} else {
		s.objects[f.key] = fs
	}
	s.mu.Unlock()

	f.resp, f.err, f.backend, f.repaired, f.expired = shared.Response, err, shared.Backend, shared.repaired, expired
	close(f.done)
}

// wait waits for f's answer, or for ctx to end: a caller that goes away stops waiting with
// its own DEADLINE_EXCEEDED or CANCELED, and the flight continues for the others.
// errFlightExpired (never returned to a caller) says that f failed at its deadline while the
// caller has time left: it should try again.
func (s *Serializer) wait(ctx context.Context, call *Call, f *flight) error {
	select {
	case <-f.done:
	case <-ctx.Done():
		select {
		case <-f.done: // the answer came as the caller left: it gets it
		default:
			s.leave(f)
			return stoppedWaiting(ctx, &f.operation)
		}
	}
	// The backend's attempts go to one caller only, so per-backend counts stay true.
	if f.credited.CompareAndSwap(false, true) {
		ci := backends.CallInfoFrom(ctx)
		for range f.info.Attempts() {
			ci.AddAttempt()
		}
	}
	if f.err != nil && f.outlivedBy(ctx) {
		return errFlightExpired
	}
	call.Response, call.Backend, call.repaired = f.resp, f.backend, f.repaired
	return f.err
}

// errFlightExpired is wait's word for "try again": see flight.
var errFlightExpired = errors.New("csi-gateway: the shared call ran out of its deadline")

// outlivedBy reports whether a caller with ctx has time left after f ran out of its own:
// its deadline is later than f's by more than deadlineSlack.
func (f *flight) outlivedBy(ctx context.Context) bool {
	if !f.expired || ctx.Err() != nil {
		return false
	}
	dl, ok := ctx.Deadline()
	return !ok || dl.Sub(f.deadline) > deadlineSlack
}

// leave drops one waiter from f; the last one to go cancels the backend call.
func (s *Serializer) leave(f *flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.waiters--
	if f.waiters == 0 {
		f.abandoned = true
		f.cancel()
	}
}

// aborted is the ABORTED status for op, refused because f is in flight on the same object.
// It is a final CSI status (serialize sits outside canonicalize): code 10, no details, a
// bounded message scrubbed of the refused request's secret values.
func aborted(call *Call, op *operation, f *flight, r *redact.Redactor) error {
	inFlight := f.describe()
	if f.method == op.method && f.scope == op.scope {
		inFlight = "another " + inFlight
	}
	msg := fmt.Sprintf("csi-gateway: %s: %s is already in progress; retry %s when it has finished",
		op.object(), inFlight, op.name)
	return status.Error(codes.Aborted, boundMessage(call.secrets(r).Scrub(msg)))
}

// stoppedWaiting is the status of a caller that went away while op was in flight.
func stoppedWaiting(ctx context.Context, op *operation) error {
	class := callerGone(ctx)
	return status.Error(class.Code(), boundMessage(fmt.Sprintf("csi-gateway: %s on %s: the caller stopped waiting: %v",
		op.describe(), op.object(), ctx.Err())))
}
