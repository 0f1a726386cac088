package tenancy

import (
	"context"
	"fmt"
	"time"
)

// Operation is one serialized operation on an object, as the store's lock sees it: the
// gateway's serializer takes the lock once for each operation it sends to the backend, so
// that replicas (etcd) and a restarted process (bbolt) never run two operations on one object
// at once.
type Operation struct {
	// Object is the serializer's key of the object: the caller's tenant, the kind of object
	// and the name or ID the caller sent.
	Object string
	// Scope is the attachment the operation acts on (a node, a target path); "" for the
	// whole object, which conflicts with every operation on it.
	Scope string
	// Method names the operation in messages ("CreateVolume").
	Method string
	// Identity is a digest of the request: identical requests have the same.
	Identity string
	// Deadline is when the operation's backend call ends at the latest; zero: it has none.
	Deadline time.Time
}

// Held is the refusal of an operation whose object is locked by another operation in flight:
// on another replica, or in a process that stopped while the operation was in flight.
type Held struct {
	// Method and Scope are the operation in flight.
	Method, Scope string
	// Identical: the operation in flight is the same request as the refused one.
	Identical bool
	// HolderGone: the replica (or process) that started it has stopped; the lock lasts until
	// Deadline, as long as its backend call may still be running.
	HolderGone bool
	// Deadline is when the backend call of the operation in flight ends at the latest (zero:
	// it has none).
	Deadline time.Time
	// Ends is when the lock of holders that are gone ends at the latest: Deadline and what the
	// store's lock outlives a dead holder's call by. Zero: not known (a live holder's call
	// may end at any moment).
	Ends time.Time

	// wait returns when the lock may have changed, or ctx has ended.
	wait func(ctx context.Context) error
}

func (h *Held) Error() string {
	if h.HolderGone {
		return fmt.Sprintf("%s was in flight on a replica that stopped; its backend call may run until %s",
			h.Method, h.Deadline.UTC().Format(time.RFC3339))
	}
	return h.Method + " is in flight on another replica"
}

// lockValue is what a store keeps of an operation in flight.
type lockValue struct {
	Method   string    `json:"m"`
	Scope    string    `json:"s,omitempty"`
	Identity string    `json:"id"`
	Deadline time.Time `json:"d,omitzero"`
}

func valueOf(op Operation) lockValue {
	return lockValue{Method: op.Method, Scope: op.Scope, Identity: op.Identity, Deadline: op.Deadline}
}

// inFlight is an operation holding an object's lock, as a store found it.
type inFlight struct {
	lockValue
	alive bool // its replica (or process) is still running
}

// heldBy is the refusal of op by the conflicting operations in flight (nil if there are
// none); linger is how long after its call's deadline the lock of a holder that died may
// last (a lease's slack, a TTL's rounding); wait returns when they may have changed.
func heldBy(op Operation, flights []inFlight, linger time.Duration, wait func(ctx context.Context) error) *Held {
	if len(flights) == 0 {
		return nil
	}
	h := &Held{Method: flights[0].Method, Scope: flights[0].Scope, Identical: true, HolderGone: true, wait: wait}
	for _, f := range flights {
		h.Identical = h.Identical && f.Identity == op.Identity
		h.HolderGone = h.HolderGone && !f.alive
		if f.Deadline.After(h.Deadline) {
			h.Deadline = f.Deadline
		}
	}
	if h.HolderGone && !h.Deadline.IsZero() {
		h.Ends = h.Deadline.Add(linger)
	}
	return h
}

// opLocker is the part of a Store that locks objects for operations.
type opLocker interface {
	// tryLock takes the lock of op's object, or returns the *Held that prevents it (with
	// its wait set).
	tryLock(ctx context.Context, op Operation) (unlock func(), held *Held, err error)
}

// lockWaitShare: a lock's waits take at most 1/lockWaitShare of the time its call had left
// when it asked for the lock. The rest is the call's own, for its steps once it holds the
// lock (its backend call, the ledger's record, giving the lock back): a call that waited
// never runs into its deadline for having waited.
const lockWaitShare = 2

// LockOperation takes the store's lock of op's object for as long as op is in flight, and
// returns the function that gives it back (it is not bounded by a call; a store that cannot
// release it at once does so later).
//
// While an identical operation holds the lock, it waits for that one to end and then takes
// the lock (the caller then makes its own call, which the ended one has made idempotent: a
// create of the same name finds the volume). It waits for half of the time ctx had left at
// most (lockWaitShare), keeping the other half for its own steps, and is then refused: a
// live holder's call may last until its own deadline, and one that ended just before the
// waiter's would leave it too little time for its backend call. The lock of a holder that
// is gone it waits for only if the lock ends (Held.Ends: the dead call's deadline and the
// lock's slack) before that point: otherwise it is refused at once, rather than waiting and
// then running out of time. A different operation is refused at once. A refusal is a *Held;
// waited says whether it waited. An error of the store is UNAVAILABLE, naming the store; an
// operation whose ctx ends while it waits gets ctx's error.
func (l *Ledger) LockOperation(ctx context.Context, op Operation) (unlock func(), waited bool, err error) {
	// The waits' end is fixed now, at the call's first step: waits and their retries all end
	// by then.
	waitCtx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, max(time.Until(dl)/lockWaitShare, 0))
		defer cancel()
	}
	for {
		unlock, held, err := l.store.tryLock(ctx, op)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, waited, ctx.Err()
		case err != nil:
			return nil, waited, ledgerError(err)
		case held == nil:
			return unlock, waited, nil
		case !held.Identical || !held.canEndWithin(waitCtx) || waitCtx.Err() != nil:
			return nil, waited, held
		}
		waited = true
		err = held.wait(waitCtx)
		switch {
		case ctx.Err() != nil:
			return nil, waited, ctx.Err()
		case waitCtx.Err() != nil:
			return nil, waited, held // still held when the waits' share of ctx's time is spent
		case err != nil:
			return nil, waited, ledgerError(err)
		}
	}
}

// canEndWithin reports whether the lock ends at the latest before waitCtx's deadline (or its
// end is not known).
func (h *Held) canEndWithin(waitCtx context.Context) bool {
	dl, ok := waitCtx.Deadline()
	return h.Ends.IsZero() || !ok || !dl.Before(h.Ends)
}
