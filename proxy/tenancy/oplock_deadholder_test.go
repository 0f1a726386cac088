package tenancy

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The lock of an operation whose holder is gone (Held.HolderGone) ends at Held.Ends at the
// latest: its call's deadline, and what the store's lock outlives it by (bbolt: nothing;
// etcd: the "until" key's slack and its whole-second TTL). An identical operation waits for
// it only if that end falls within the half of its time it may wait (LockOperation); any
// other operation is refused at once. These tests run on both stores (TestLedgerStores).

// afterDeadHolder locks op on a ledger that is then closed, as a replica killed or a process
// stopped mid-call (etcd: its lease revoked, the operation's "until" key left; bbolt: the
// operation left in the file), and returns a ledger opened on the same state afterwards.
func afterDeadHolder(t *testing.T, open opener, op Operation) *Ledger {
	t.Helper()
	dying := open(t, nil)
	lockOrFail(t, dying, op)
	dying.Close()
	return open(t, nil)
}

// refusedForDeadHolder asserts that l refuses op at once, with ctx ending at end, naming the
// gone holder of the identical (or not) operation whose call ends at deadline, and returns
// the refusal.
func refusedForDeadHolder(t *testing.T, l *Ledger, op Operation, end, deadline time.Time, identical bool) *Held {
	t.Helper()
	ctx, cancel := context.WithDeadline(t.Context(), end)
	defer cancel()
	held := refused(t, l, ctx, op)
	if held.Identical != identical || !held.HolderGone || !held.Deadline.Equal(deadline) || held.Ends.Before(deadline) {
		t.Errorf("refusal of %s (identity %q): %+v; want a gone holder (identical: %v), deadline %s, its lock ending then or later",
			op.Method, op.Identity, held, identical, deadline)
	}
	if ctx.Err() != nil {
		t.Errorf("refused when its context had ended (%v); want refused at once", ctx.Err())
	}
	return held
}

// testLockDeadHolderWaitedOut: an identical operation with time to outwait a dead holder's
// lock (its end falls within the half of its time) waits for it and then takes the lock —
// never before the dead call's deadline, while that call may still run on the backend.
func testLockDeadHolderWaitedOut(t *testing.T, open opener) {
	deadline := time.Now().Add(2 * time.Second)
	op := lockOf("blue/volume-name:pvc-1", "CreateVolume", "", deadline)
	l := afterDeadHolder(t, open, op)
	// A minute, half of which it may wait: the lock ends within seconds of the deadline.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dl, _ := ctx.Deadline()
	half := dl.Add(-time.Minute / lockWaitShare) // its waits end then at the earliest
	held := refusedForDeadHolder(t, l, lockOf(op.Object, "DeleteVolume", "", time.Time{}), half, deadline, false)
	if held.Ends.After(half) {
		t.Fatalf("the dead holder's lock ends at %s, after the waiter's half of its time (%s): the test's premise is broken", held.Ends, half)
	}

	unlock, waited, err := l.LockOperation(ctx, op)
	took := time.Now()
	if err != nil || !waited {
		t.Fatalf("an identical operation whose half of its time covers the dead holder's lock: waited %v, %v; want it to wait and take the lock", waited, err)
	}
	defer unlock()
	if took.Before(deadline) {
		t.Errorf("took the lock at %s, before the dead operation's deadline %s", took, deadline)
	}
}

// testLockDeadHolderTooLate: an identical operation is refused at once, without waiting, by
// a dead holder's lock that ends after the half of its time: when its own deadline comes
// first; when the lock ends before its deadline but after its half (three quarters of its
// time); and, where the lock outlives its call (etcd), when the call's deadline falls within
// its half but the lock's end does not. (Comparing the lock's end with the whole of its time
// would make the second wait; comparing the dead call's deadline with its half, the third.)
func testLockDeadHolderTooLate(t *testing.T, open opener) {
	deadline := time.Now().Add(20 * time.Second)
	op := lockOf("blue/volume-name:pvc-1", "CreateVolume", "", deadline)
	l := afterDeadHolder(t, open, op)

	ends := refusedForDeadHolder(t, l, op, deadline, deadline, true).Ends
	now := time.Now()
	refusedForDeadHolder(t, l, op, now.Add(ends.Sub(now)*4/3), deadline, true)
	if linger := ends.Sub(deadline); linger > 0 {
		// Its half ends a quarter of the way from the deadline to the lock's end (with
		// etcd: half a second after the deadline, a second and a half before the end).
		halfEnds := deadline.Add(linger / 4)
		now := time.Now()
		refusedForDeadHolder(t, l, op, halfEnds.Add(halfEnds.Sub(now)), deadline, true)
	}
}

// testLockDeadHolderRefusesOthers: any operation other than the dead holder's own (another
// method, another request of the same method, one attachment's operation) is refused at once,
// naming the deadline until which the dead call may run, even with time enough to outwait it.
func testLockDeadHolderRefusesOthers(t *testing.T, open opener) {
	deadline := time.Now().Add(5 * time.Second)
	const object = "blue/volume-name:pvc-1"
	l := afterDeadHolder(t, open, lockOf(object, "CreateVolume", "", deadline))
	end := time.Now().Add(time.Minute) // half of it covers the lock
	for _, other := range []Operation{
		lockOf(object, "DeleteVolume", "", time.Time{}),
		{Object: object, Method: "CreateVolume", Identity: "another request", Deadline: end},
		lockOf(object, "ControllerPublishVolume", "node-1", end),
	} {
		held := refusedForDeadHolder(t, l, other, end, deadline, false)
		if msg, when := held.Error(), deadline.UTC().Format(time.RFC3339); held.Method != "CreateVolume" || !strings.Contains(msg, when) {
			t.Errorf("refusal of %s (identity %q): %q; want it to name CreateVolume and its deadline %s", other.Method, other.Identity, msg, when)
		}
	}
}
