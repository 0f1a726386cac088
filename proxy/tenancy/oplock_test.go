package tenancy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// lockOf is an operation on object: its method and scope make its identity.
func lockOf(object, method, scope string, deadline time.Time) Operation {
	return Operation{Object: object, Scope: scope, Method: method, Identity: method + "/" + scope, Deadline: deadline}
}

// lockOrFail takes op's lock, failing the test if it is refused.
func lockOrFail(t *testing.T, l *Ledger, op Operation) func() {
	t.Helper()
	unlock, _, err := l.LockOperation(t.Context(), op)
	if err != nil {
		t.Fatalf("locking %s on %s: %v", op.Method, op.Object, err)
	}
	return unlock
}

// refused asserts that op's lock is refused at once with a *Held, and returns it.
func refused(t *testing.T, l *Ledger, ctx context.Context, op Operation) *Held {
	t.Helper()
	unlock, waited, err := l.LockOperation(ctx, op)
	var held *Held
	if !errors.As(err, &held) || waited {
		if unlock != nil {
			unlock()
		}
		t.Fatalf("locking %s (scope %q) on %s: waited %v, %v; want refused at once", op.Method, op.Scope, op.Object, waited, err)
	}
	return held
}

// testLockConflicts: a different operation on a locked object is refused at once, naming
// the one in flight; operations on two attachments of one object do not conflict, and
// either conflicts with an operation on the whole object; unlocking frees the object.
func testLockConflicts(t *testing.T, open opener) {
	l := open(t, nil)
	deadline := time.Now().Add(time.Minute)
	unlock := lockOrFail(t, l, lockOf("blue/volume:v1", "DeleteVolume", "", deadline))
	held := refused(t, l, t.Context(), lockOf("blue/volume:v1", "ControllerExpandVolume", "", deadline))
	if held.Method != "DeleteVolume" || held.Identical || held.HolderGone {
		t.Errorf("refusal: %+v, want the live DeleteVolume, not identical", held)
	}
	refused(t, l, t.Context(), lockOf("blue/volume:v1", "ControllerPublishVolume", "node-1", deadline))
	lockOrFail(t, l, lockOf("green/volume:v1", "DeleteVolume", "", deadline))() // another tenant's object
	unlock()

	unlock1 := lockOrFail(t, l, lockOf("blue/volume:v1", "ControllerPublishVolume", "node-1", deadline))
	unlock2 := lockOrFail(t, l, lockOf("blue/volume:v1", "ControllerPublishVolume", "node-2", deadline))
	refused(t, l, t.Context(), lockOf("blue/volume:v1", "ControllerUnpublishVolume", "node-1", deadline))
	refused(t, l, t.Context(), lockOf("blue/volume:v1", "DeleteVolume", "", deadline))
	unlock1()
	unlock2()
	lockOrFail(t, l, lockOf("blue/volume:v1", "DeleteVolume", "", deadline))()
}

// testLockIdenticalWaits: an identical operation waits while the lock is held, and takes it
// when the first one unlocks; one still waiting when half of its time is spent is refused.
func testLockIdenticalWaits(t *testing.T, open opener) {
	l := open(t, nil)
	op := lockOf("blue/volume-name:pvc-1", "CreateVolume", "", time.Now().Add(time.Minute))
	unlock := lockOrFail(t, l, op)
	type result struct {
		unlock func()
		waited bool
		err    error
	}
	got := make(chan result, 1)
	go func() {
		u, waited, err := l.LockOperation(t.Context(), op)
		got <- result{u, waited, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("the identical operation did not wait: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	// A waiter still waiting when half of its time is spent is refused then; one whose
	// context is cancelled while it waits stops waiting with its context's error.
	short, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	var held *Held
	if _, waited, err := l.LockOperation(short, op); !waited || !errors.As(err, &held) || short.Err() != nil {
		t.Errorf("a waiter whose deadline comes first: waited %v, %v (its context: %v); want refused before its deadline", waited, err, short.Err())
	}
	gone, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, waited, err := l.LockOperation(gone, op); !waited || !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose caller goes away: waited %v, %v; want context.Canceled", waited, err)
	}
	unlock()
	r := <-got
	if r.err != nil || !r.waited {
		t.Fatalf("the identical operation after the first unlocked: waited %v, %v", r.waited, r.err)
	}
	r.unlock()
	lockOrFail(t, l, lockOf("blue/volume-name:pvc-1", "CreateVolume", "", time.Time{}))()
}

// testLockWaitKeepsItsShare: an identical operation waits for a live one in flight for half
// of the time its call has left at most, and is then refused, naming it: the other half is
// its own. (Waiting until a margin before the deadline, a call that got the lock just then
// had too little time left for its backend call, and answered DEADLINE_EXCEEDED.)
func testLockWaitKeepsItsShare(t *testing.T, open opener) {
	l := open(t, nil)
	op := lockOf("blue/volume-name:pvc-1", "CreateVolume", "", time.Now().Add(time.Minute))
	unlock := lockOrFail(t, l, op)
	defer unlock()
	const budget = 6 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	dl, _ := ctx.Deadline()
	_, waited, err := l.LockOperation(ctx, op)
	left := time.Until(dl)
	var held *Held
	if !waited || !errors.As(err, &held) || !held.Identical || held.HolderGone {
		t.Fatalf("a waiter for a live identical operation that does not end: waited %v, %v; want refused after waiting", waited, err)
	}
	// Refused with half of it left (3 s); a loaded machine may be late by a little. Waiting
	// until the margin before the deadline, it would have 0.6 s left.
	if left < budget/4 {
		t.Errorf("refused with %s of its %s left; want about half of it kept for its own call", left.Round(time.Millisecond), budget)
	}
}

// testLockOutlivesItsHolder: a ledger closed while an operation holds a lock (a replica
// killed, a process stopped) leaves the object locked, in a ledger opened afterwards (a
// replica, the process restarted), until the operation's deadline: a different operation is
// refused naming the deadline, an identical one whose deadline comes first (with etcd: or
// within the lock's slack after it) is refused, one with time to spare waits for it and then
// takes the lock. An operation without a deadline
// locks nothing once its holder is gone.
func testLockOutlivesItsHolder(t *testing.T, open opener) {
	dying := open(t, nil)
	deadline := time.Now().Add(3 * time.Second)
	op := lockOf("blue/volume-name:pvc-1", "CreateVolume", "", deadline)
	lockOrFail(t, dying, op)
	lockOrFail(t, dying, lockOf("blue/volume:v9", "DeleteVolume", "", time.Time{}))
	dying.Close()

	l := open(t, nil)
	lockOrFail(t, l, lockOf("blue/volume:v9", "DeleteVolume", "", time.Time{}))()
	held := refused(t, l, t.Context(), lockOf("blue/volume-name:pvc-1", "CreateVolume", "other", time.Time{}))
	if !held.HolderGone || !held.Deadline.Equal(deadline) {
		t.Errorf("refusal: %+v, want a gone holder with deadline %s", held, deadline)
	}
	early, cancel := context.WithDeadline(t.Context(), deadline.Add(-time.Second))
	refused(t, l, early, op)
	cancel()
	if _, onEtcd := l.store.(*etcdStore); onEtcd {
		// Its "until" key outlives the deadline by up to about 2 s (slack, whole-second TTLs):
		// a deadline within that cannot outwait it either.
		within, cancel := context.WithDeadline(t.Context(), deadline.Add(1500*time.Millisecond))
		refused(t, l, within, op)
		cancel()
	}
	unlock, waited, err := l.LockOperation(t.Context(), op)
	if err != nil || !waited {
		t.Fatalf("an identical operation with time to spare: waited %v, %v", waited, err)
	}
	if now := time.Now(); now.Before(deadline) {
		t.Errorf("took the lock at %s, before the dead operation's deadline %s", now, deadline)
	}
	unlock()
	lockOrFail(t, l, lockOf("blue/volume-name:pvc-1", "DeleteVolume", "", time.Time{}))()
}

// BenchmarkLockOperation: what locking and unlocking one operation costs on each store (a
// bbolt file: two synced writes; a 3-member etcd on loopback: a lease grant and two
// transactions, the revoke off the call's path).
func BenchmarkLockOperation(b *testing.B) {
	deadline := time.Now().Add(time.Hour)
	run := func(b *testing.B, l *Ledger) {
		for i := 0; b.Loop(); i++ {
			unlock, _, err := l.LockOperation(b.Context(), lockOf(fmt.Sprintf("blue/volume:v%d", i), "DeleteVolume", "", deadline))
			if err != nil {
				b.Fatal(err)
			}
			unlock()
		}
	}
	b.Run("bbolt", func(b *testing.B) {
		l, err := Open(filepath.Join(b.TempDir(), "tenancy.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
	})
	b.Run("etcd", func(b *testing.B) {
		cluster := testutil.StartEtcd(b, 3)
		tc, err := tlsconf.NewClient(tlsconf.ClientFiles{CA: cluster.CA, Cert: cluster.Cert, Key: cluster.Key, ServerName: cluster.ServerName})
		if err != nil {
			b.Fatal(err)
		}
		store, err := OpenEtcd(EtcdConfig{Endpoints: cluster.Endpoints(), TLS: tc, Prefix: "/bench/"})
		if err != nil {
			b.Fatal(err)
		}
		l, err := New(store, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
	})
}

// testDeadReplicasLockLastsItsLease: a replica that dies without a word (nothing revoked)
// holds the objects of its operations until the later of its lease's expiry and their
// deadlines: here the lease (8 s) outlives the deadline (1 s), and the object stays locked
// after the deadline, until the lease expires; an identical operation waits for that.
func testDeadReplicasLockLastsItsLease(t *testing.T, cluster *testutil.EtcdCluster) {
	prefix := "/" + t.Name() + "/"
	a := openEtcdLedger(t, cluster, prefix, nil, func(c *EtcdConfig) { c.LeaseTTL = 8 * time.Second })
	b := openEtcdLedger(t, cluster, prefix, nil, nil)
	deadline := time.Now().Add(time.Second)
	op := lockOf("blue/volume-name:pvc-1", "CreateVolume", "", deadline)
	lockOrFail(t, a, op)
	dead := a.store.(*etcdStore)
	dead.endLife() // no more keep-alives: as a killed process
	dead.client.Close()

	// Past the deadline and its "until" lease (granted for at most 2 s), well before the
	// replica's lease can expire (at least 8 s less one keep-alive interval after its death).
	time.Sleep(time.Until(deadline.Add(2500 * time.Millisecond)))
	held := refused(t, b, t.Context(), lockOf("blue/volume-name:pvc-1", "DeleteVolume", "", time.Time{}))
	if held.HolderGone {
		t.Errorf("refusal after the deadline: %+v, want the holder still alive (its lease has not expired)", held)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	unlock, waited, err := b.LockOperation(ctx, op)
	if err != nil || !waited {
		t.Fatalf("an identical operation: waited %v, %v; want it to wait for the dead replica's lease", waited, err)
	}
	unlock()
}

// testLockRefusesWhatItCannotOutwait: an identical operation waits for a live one in flight
// (it may end at any moment) until half of its own time is spent at the latest, and is then
// refused, naming the operation in flight, rather than waiting into its deadline; one with
// time to spare takes the lock when the first one ends.
func testLockRefusesWhatItCannotOutwait(t *testing.T, cluster *testutil.EtcdCluster) {
	prefix := "/" + t.Name() + "/"
	const ttl = 3 * time.Second
	tune := func(c *EtcdConfig) { c.LeaseTTL = ttl }
	a := openEtcdLedger(t, cluster, prefix, nil, tune)
	b := openEtcdLedger(t, cluster, prefix, nil, tune)
	deadline := time.Now().Add(time.Minute)
	op := lockOf("blue/volume-name:pvc-1", "CreateVolume", "", deadline)
	unlock := lockOrFail(t, a, op)

	soon, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, waited, err := b.LockOperation(soon, op)
	var held *Held
	if !errors.As(err, &held) || !waited || !held.Identical || held.HolderGone || soon.Err() != nil {
		t.Errorf("a waiter whose deadline comes first: waited %v, %v (its context: %v); want refused after waiting, before its deadline", waited, err, soon.Err())
	}

	later, cancel := context.WithDeadline(t.Context(), deadline.Add(time.Minute))
	defer cancel()
	type result struct {
		unlock func()
		waited bool
		err    error
	}
	var seen observed
	b.Observe(&seen)
	got := make(chan result, 1)
	go func() {
		u, waited, err := b.LockOperation(later, op)
		got <- result{u, waited, err}
	}()
	for requests, _ := seen.counts(); requests["Txn"] == 0; requests, _ = seen.counts() {
		time.Sleep(10 * time.Millisecond) // until its lock was refused: it waits (from that revision on)
	}
	unlock()
	r := <-got
	if r.err != nil || !r.waited {
		t.Fatalf("an identical operation with time to spare: waited %v, %v; want it to wait and take the lock", r.waited, r.err)
	}
	r.unlock()
}

// TestEtcdLockDoesNotQueueBehindLeaseGrants: calls locking objects on a replica that has no
// lease (none granted yet, or lost while etcd has no quorum) each answer UNAVAILABLE naming
// etcd before their own deadlines. They used to queue behind one another's lease grants, each
// up to a request timeout, and answer at their deadlines (DEADLINE_EXCEEDED in the quorum
// chaos test).
func TestEtcdLockDoesNotQueueBehindLeaseGrants(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	const timeout = 2 * time.Second
	l := openEtcdLedger(t, cluster, "/grants/", nil, func(c *EtcdConfig) { c.RequestTimeout = timeout })
	cluster.Stop(1)
	cluster.Stop(2)
	const calls = 6
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Second)
			defer cancel()
			dl, _ := ctx.Deadline()
			_, _, err := l.LockOperation(ctx, lockOf(fmt.Sprintf("blue/volume:v%d", i), "DeleteVolume", "", dl))
			errs <- err
		}()
	}
	for range calls {
		err := <-errs
		if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "etcd at "+cluster.Endpoints()[0]) {
			t.Errorf("locking without quorum and without a lease: %v %q; want UNAVAILABLE naming etcd before the call's deadline", st.Code(), st.Message())
		}
	}
}

// answerLost is a KV whose transactions reach etcd but whose answers are lost on the way
// back, as when a member is killed or a request times out while etcd is slow: the caller
// cannot tell whether they were applied.
type answerLost struct{ clientv3.KV }

func (k answerLost) Txn(ctx context.Context) clientv3.Txn { return lostTxn{k.KV.Txn(ctx)} }

type lostTxn struct{ clientv3.Txn }

func (t lostTxn) If(c ...clientv3.Cmp) clientv3.Txn  { return lostTxn{t.Txn.If(c...)} }
func (t lostTxn) Then(o ...clientv3.Op) clientv3.Txn { return lostTxn{t.Txn.Then(o...)} }
func (t lostTxn) Else(o ...clientv3.Op) clientv3.Txn { return lostTxn{t.Txn.Else(o...)} }
func (t lostTxn) Commit() (*clientv3.TxnResponse, error) {
	t.Txn.Commit()
	return nil, status.Error(codes.Unavailable, "error reading from server: connection reset by peer")
}

// TestEtcdLockWhoseAnswerWasLost: a lock whose transaction was applied though its answer was
// lost (the caller got UNAVAILABLE, and its operation did not run) does not lock the object
// for as long as the replica lives: another replica takes the object's lock soon after.
// (The replica chaos test's retries were ABORTED for two minutes by such a lock.)
func TestEtcdLockWhoseAnswerWasLost(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	prefix := "/lost/"
	a := openEtcdLedger(t, cluster, prefix, nil, nil)
	b := openEtcdLedger(t, cluster, prefix, nil, nil)
	store := a.store.(*etcdStore)
	store.client.KV = answerLost{store.client.KV}
	deadline := time.Now().Add(time.Minute)
	if _, _, err := a.LockOperation(t.Context(), lockOf("blue/volume-name:pvc-1", "CreateVolume", "", deadline)); status.Code(err) != codes.Unavailable {
		t.Fatalf("a lock whose answer was lost: %v; want UNAVAILABLE", err)
	}
	// A's lease lives on (the test's ledgers close when it ends); its keys must not.
	for giveUp := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		unlock, _, err := b.LockOperation(t.Context(), lockOf("blue/volume-name:pvc-1", "DeleteVolume", "", deadline))
		if err == nil {
			unlock()
			return
		}
		if time.Now().After(giveUp) {
			t.Fatalf("another replica still cannot lock the object 15 s after a lock whose answer was lost: %v", err)
		}
	}
}
