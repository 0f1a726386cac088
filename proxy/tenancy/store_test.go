package tenancy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// opener opens a ledger on one store's state — the same state on every call (a restart, or
// another replica); the ledgers close when the test ends.
type opener func(t *testing.T, quotas map[string]Quota) *Ledger

// TestLedgerStores runs the ledger's behaviours on each store: a bbolt file, and a real
// 3-member etcd cluster (one per run, each behaviour under a prefix of its own), then what
// only etcd does: replicas sharing quotas, and holds that die with a replica's lease.
func TestLedgerStores(t *testing.T) {
	shared := []struct {
		name string
		test func(*testing.T, opener)
	}{
		{"SurvivesReopen", testLedgerSurvivesReopen},
		{"QuotaSurvivesReopen", testLedgerQuotaSurvivesReopen},
		{"RecordRefusesAnotherTenantsObject", testLedgerRecordRefusesAnotherTenantsObject},
		{"Forget", testLedgerForget},
		{"OwnedIndex", testOwnedIndex},
		{"ReserveRelease", testReserveRelease},
		{"ReserveConcurrent", testReserveConcurrent},
		{"LockConflicts", testLockConflicts},
		{"LockIdenticalWaits", testLockIdenticalWaits},
		{"LockWaitKeepsItsShare", testLockWaitKeepsItsShare},
		{"LockOutlivesItsHolder", testLockOutlivesItsHolder},
		{"LockDeadHolderWaitedOut", testLockDeadHolderWaitedOut},
		{"LockDeadHolderTooLate", testLockDeadHolderTooLate},
		{"LockDeadHolderRefusesOthers", testLockDeadHolderRefusesOthers},
		{"CreateHoldOutlivesItsHolder", testCreateHoldOutlivesItsHolder},
		{"CreateHoldsConcurrentAndReleased", testCreateHoldsConcurrentAndReleased},
		{"CreateOfALostVolume", testCreateOfALostVolume},
		{"CreateOfALostVolumeUnrecorded", testCreateOfALostVolumeUnrecorded},
		{"CreateOfALostVolumeDeleteRetried", testCreateOfALostVolumeDeleteRetried},
		{"RecordReplacesItsNamesStaleRecord", testRecordReplacesItsNamesStaleRecord},
	}
	run := func(t *testing.T, fresh func(t *testing.T) opener) {
		for _, b := range shared {
			t.Run(b.name, func(t *testing.T) { b.test(t, fresh(t)) })
		}
	}
	t.Run("bbolt", func(t *testing.T) {
		run(t, func(t *testing.T) opener {
			path := filepath.Join(t.TempDir(), "tenancy.db")
			return func(t *testing.T, quotas map[string]Quota) *Ledger { return openLedger(t, path, quotas) }
		})
	})
	t.Run("etcd", func(t *testing.T) {
		cluster := testutil.StartEtcd(t, 3)
		fresh := func(t *testing.T) opener {
			prefix := "/" + t.Name() + "/"
			return func(t *testing.T, quotas map[string]Quota) *Ledger {
				return openEtcdLedger(t, cluster, prefix, quotas, nil)
			}
		}
		run(t, fresh)
		for _, b := range []struct {
			name string
			test func(*testing.T, opener)
		}{
			{"HoldBetweenCheckAndCommit", testHoldBetweenCheckAndCommit},
			{"ReplicasNeverOvershoot", testReplicasNeverOvershoot},
			{"RevokedLeaseFreesHolds", testRevokedLeaseFreesHolds},
			{"DeadReplicasHoldsExpire", testDeadReplicasHoldsExpire},
		} {
			t.Run(b.name, func(t *testing.T) { b.test(t, fresh(t)) })
		}
		t.Run("DeadReplicasLockLastsItsLease", func(t *testing.T) { testDeadReplicasLockLastsItsLease(t, cluster) })
		t.Run("LockRefusesWhatItCannotOutwait", func(t *testing.T) { testLockRefusesWhatItCannotOutwait(t, cluster) })
	})
}

// openEtcdLedger opens a ledger on cluster under prefix, closed when the test ends; tune, if
// not nil, adjusts its configuration.
func openEtcdLedger(t *testing.T, cluster *testutil.EtcdCluster, prefix string, quotas map[string]Quota, tune func(*EtcdConfig)) *Ledger {
	t.Helper()
	tc, err := tlsconf.NewClient(tlsconf.ClientFiles{CA: cluster.CA, Cert: cluster.Cert, Key: cluster.Key, ServerName: cluster.ServerName})
	if err != nil {
		t.Fatal(err)
	}
	cfg := EtcdConfig{
		Endpoints: cluster.Endpoints(),
		TLS:       tc,
		Prefix:    prefix,
		// Generous: the machine running the tests may be loaded.
		RequestTimeout: 20 * time.Second,
		LeaseTTL:       3 * time.Second,
	}
	if tune != nil {
		tune(&cfg)
	}
	store, err := OpenEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(store, quotas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// testHoldBetweenCheckAndCommit: the interleaving the hold's transaction exists for, forced.
// Replica A checks the quota (one volume, none used), and before A commits its hold, replica B
// takes the last room. A's commit must fail, and its second check see B's hold: refused.
func testHoldBetweenCheckAndCommit(t *testing.T, open opener) {
	a, b := open(t, nil).store, open(t, nil).store
	ctx := t.Context()
	oneVolume := func(u usage) error {
		if u.volumes >= 1 {
			return errors.New("full")
		}
		return nil
	}
	checks := 0
	_, err := a.hold(ctx, "blue", usage{volumes: 1}, "", func(u usage) error {
		checks++
		if checks == 1 {
			if _, err := b.hold(ctx, "blue", usage{volumes: 1}, "", oneVolume); err != nil {
				t.Fatalf("B's hold: %v", err)
			}
		}
		return oneVolume(u)
	})
	if err == nil || err.Error() != "full" || checks != 2 {
		t.Fatalf("A's hold after B took the room between A's check and A's commit: %v after %d checks; want refused at the second check", err, checks)
	}
	if u, err := a.usage(ctx, "blue"); err != nil || u != (usage{volumes: 1}) {
		t.Errorf("blue's usage = %+v, %v; want B's one hold", u, err)
	}
}

// testReplicasNeverOvershoot: two replicas (two ledgers on one etcd prefix), twenty
// goroutines each, reserve and record volumes at once against one quota: exactly the quota
// is admitted, whatever the interleaving; what one replica forgets, the other can use.
func testReplicasNeverOvershoot(t *testing.T, open opener) {
	quotas := map[string]Quota{"blue": {MaxVolumes: 5, MaxBytes: 100 * mib}}
	replicas := []*Ledger{open(t, quotas), open(t, quotas)}
	ctx := t.Context()
	var next int
	var nextMu sync.Mutex
	round := func() (created []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 40 {
			l := replicas[i%2]
			wg.Go(func() {
				<-start
				res, err := l.reserve(ctx, "blue", 1, 10*mib, "")
				if err != nil {
					if status.Code(err) != codes.ResourceExhausted {
						t.Errorf("reserve: %v", err)
					}
					return
				}
				defer res.release()
				nextMu.Lock()
				next++
				id := fmt.Sprintf("vol-%d", next)
				nextMu.Unlock()
				if err := l.recordReserved(ctx, Volume, id, Record{Tenant: "blue", Name: "blue." + id, Bytes: 10 * mib}, res); err != nil {
					t.Errorf("record %s: %v", id, err)
					return
				}
				mu.Lock()
				created = append(created, id)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		return created
	}
	created := round()
	if len(created) != 5 {
		t.Fatalf("%d of 40 creates from two replicas were admitted under maxVolumes 5", len(created))
	}
	for i, l := range replicas {
		if u := l.usageNow("blue"); u != (usage{5, 50 * mib}) {
			t.Errorf("replica %d sees blue's usage as %+v; want 5 volumes, 50 MiB, no hold", i, u)
		}
	}
	// Replica 1 forgets two; both replicas compete for the room again.
	for _, id := range created[:2] {
		if err := replicas[1].Forget(ctx, Volume, id); err != nil {
			t.Fatal(err)
		}
	}
	if again := round(); len(again) != 2 {
		t.Fatalf("%d of 40 creates were admitted with room for 2", len(again))
	}
	if u := replicas[0].usageNow("blue"); u != (usage{5, 50 * mib}) {
		t.Errorf("blue's usage = %+v; want 5 volumes, 50 MiB", u)
	}
}

// testRevokedLeaseFreesHolds: a replica's holds are bound to its lease: when the lease is
// revoked (or the replica closes), another replica gets the room, and the first one takes a
// new lease for its next hold. Its observer is told of its requests (by etcd method) and of
// the lease lost — once: not of the one its Close revokes.
func testRevokedLeaseFreesHolds(t *testing.T, open opener) {
	quotas := map[string]Quota{"blue": {MaxVolumes: 2}}
	a, b := open(t, quotas), open(t, quotas)
	var seen observed
	a.Observe(&seen)
	ctx := t.Context()
	for range 2 {
		if _, err := a.reserve(ctx, "blue", 1, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.reserve(ctx, "blue", 1, 0, "")
	wantCode(t, err, codes.ResourceExhausted, "2 volumes")

	store := a.store.(*etcdStore)
	store.mu.Lock()
	lease := store.lease
	store.mu.Unlock()
	if _, err := store.client.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if u := b.usageNow("blue"); u != (usage{}) {
		t.Fatalf("after the lease was revoked blue's usage is %+v; want nothing held", u)
	}
	res, err := b.reserve(ctx, "blue", 1, 0, "")
	if err != nil {
		t.Fatalf("the revoked holds still count: %v", err)
	}
	defer res.release()
	// The replica whose lease was revoked holds again, on a new lease.
	if _, err := a.reserve(ctx, "blue", 1, 0, ""); err != nil {
		t.Fatalf("a replica whose lease was revoked cannot hold again: %v", err)
	}
	if u := b.usageNow("blue"); u != (usage{volumes: 2}) {
		t.Errorf("blue's usage = %+v; want 2 volumes held", u)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, lost := seen.counts(); lost > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the observer was not told of the revoked lease within a minute")
		}
	}
	// Closing a replica frees its holds at once.
	a.Close()
	if u := b.usageNow("blue"); u != (usage{volumes: 1}) {
		t.Errorf("after a replica closed blue's usage = %+v; want only the other's hold", u)
	}
	requests, lost := seen.counts()
	if requests["Txn"] == 0 || requests["LeaseGrant"] < 2 || lost != 1 {
		t.Errorf("observed requests %v and %d leases lost; want Txns, 2 LeaseGrants or more and 1 lease lost (the revoked one, not the closed one)", requests, lost)
	}
}

// testDeadReplicasHoldsExpire: a replica that dies without a word (its client gone, nothing
// revoked) leaves holds that vanish when its lease expires.
func testDeadReplicasHoldsExpire(t *testing.T, open opener) {
	quotas := map[string]Quota{"blue": {MaxVolumes: 1}}
	a, b := open(t, quotas), open(t, quotas)
	ctx := t.Context()
	if _, err := a.reserve(ctx, "blue", 1, 0, ""); err != nil {
		t.Fatal(err)
	}
	_, err := b.reserve(ctx, "blue", 1, 0, "")
	wantCode(t, err, codes.ResourceExhausted, "1 volumes")

	dead := a.store.(*etcdStore)
	dead.endLife() // no more keep-alives: as a killed process
	dead.client.Close()

	deadline := time.Now().Add(time.Minute)
	for {
		res, err := b.reserve(ctx, "blue", 1, 0, "")
		if err == nil {
			res.release()
			return
		}
		wantCode(t, err, codes.ResourceExhausted)
		if time.Now().After(deadline) {
			t.Fatalf("a dead replica's hold outlived its lease (TTL 3s) by a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testCreateHoldOutlivesItsHolder: the hold of a create outlives the replica or process that
// took it (whose backend call may have created the volume, unrecorded): another name gets no
// room, a retry of the same name takes the hold over (and does not count it twice), and the
// retry's record turns it into usage. Without it, TestChaosReplicasUnderLoad's backend held a
// tenant's volumes over its quota after a replica was killed mid-create (etcd), and a
// restarted single gateway let other names take the room of the creates it had in flight
// (bbolt). The holder is closed before the other opens (a bbolt file takes one process).
func testCreateHoldOutlivesItsHolder(t *testing.T, open opener) {
	quotas := map[string]Quota{"blue": {MaxVolumes: 1}}
	ctx := t.Context()
	a := open(t, quotas)
	if _, err := a.reserve(ctx, "blue", 1, mib, "blue.pvc-1"); err != nil {
		t.Fatal(err)
	}
	a.Close() // etcd: its lease revoked, lease-bound holds would vanish now; bbolt: its memory gone
	b := open(t, quotas)
	if u := b.usageNow("blue"); u != (usage{volumes: 1, bytes: mib}) {
		t.Errorf("blue's usage after its holder closed = %+v; want the create's hold (1 volume, 1 MiB)", u)
	}
	_, err := b.reserve(ctx, "blue", 1, 0, "blue.pvc-2")
	wantCode(t, err, codes.ResourceExhausted, "1 volumes")
	failed, err := b.reserve(ctx, "blue", 1, mib, "blue.pvc-1")
	if err != nil {
		t.Fatalf("a retry of the dead holder's create: %v", err)
	}
	failed.release() // a retry that failed too: the hold, taken over, stays
	_, err = b.reserve(ctx, "blue", 1, 0, "blue.pvc-2")
	wantCode(t, err, codes.ResourceExhausted, "1 volumes")
	retry, err := b.reserve(ctx, "blue", 1, mib, "blue.pvc-1")
	if err != nil {
		t.Fatalf("a second retry of the dead holder's create: %v", err)
	}
	if err := b.recordReserved(ctx, Volume, "vol-1", Record{Tenant: "blue", Name: "blue.pvc-1", Bytes: mib}, retry); err != nil {
		t.Fatal(err)
	}
	if u := b.usageNow("blue"); u != (usage{volumes: 1, bytes: mib}) {
		t.Errorf("blue's usage after the retry recorded its volume = %+v; want 1 volume of 1 MiB, no hold", u)
	}
	if holds, err := CreateHolds(ctx, b.store); err != nil || len(holds) != 0 {
		t.Errorf("create holds after the retry recorded its volume: %+v, %v; want none", holds, err)
	}
}

// TestEtcdWithoutQuorum: with two of three members killed, every ledger step answers within
// the request timeout with an error naming etcd — UNAVAILABLE for the calls — even for a
// caller with no deadline of its own, and a hold released meanwhile is deleted at the next
// hold; with the members back, the ledger works again.
func TestEtcdWithoutQuorum(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	const timeout = 2 * time.Second
	l := openEtcdLedger(t, cluster, "/quorum/", map[string]Quota{"blue": {MaxVolumes: 10, MaxBytes: 100 * mib}},
		func(c *EtcdConfig) {
			c.RequestTimeout = timeout
			c.LeaseTTL = time.Hour // the outage must not expire the hold released during it
		})
	ctx := context.Background() // no deadline: only the request timeout bounds the steps
	if err := l.Record(ctx, Volume, "vol-1", Record{Tenant: "blue", Name: "blue.pvc-1", Bytes: mib}); err != nil {
		t.Fatal(err)
	}
	pending, err := l.reserve(ctx, "blue", 1, mib, "")
	if err != nil {
		t.Fatal(err)
	}
	cluster.Stop(1)
	cluster.Stop(2)
	pending.release() // cannot reach etcd: kept for later (and it returns: bounded too)

	steps := []struct {
		name string
		do   func() error
	}{
		{"Lookup", func() error { _, _, err := l.Lookup(ctx, Volume, "vol-1"); return err }},
		{"ByName", func() error { _, _, err := l.ByName(ctx, Volume, "blue.pvc-1"); return err }},
		{"Record", func() error { return l.Record(ctx, Volume, "vol-2", Record{Tenant: "blue", Bytes: mib}) }},
		{"Forget", func() error { return l.Forget(ctx, Volume, "vol-1") }},
		{"reserve", func() error { _, err := l.reserve(ctx, "blue", 1, mib, ""); return err }},
		{"bytesLeft", func() error { _, _, err := l.bytesLeft(ctx, "blue"); return err }},
		{"Usage", func() error { _, err := l.Usage(ctx); return err }},
		{"LockOperation", func() error {
			_, _, err := l.LockOperation(ctx, lockOf("blue/volume:vol-1", "DeleteVolume", "", time.Now().Add(time.Minute)))
			return err
		}},
	}
	// All at once (each on its own would take the test a request timeout per step).
	answers := make([]chan error, len(steps))
	start := time.Now()
	for i, s := range steps {
		answers[i] = make(chan error, 1)
		go func() { answers[i] <- s.do() }()
	}
	watchdog := time.After(30 * time.Second)
	for i, s := range steps {
		select {
		case err := <-answers[i]:
			if err == nil {
				t.Errorf("%s without quorum succeeded", s.name)
				continue
			}
			if !slices.Contains([]string{"reserve", "bytesLeft", "LockOperation"}, s.name) { // those answer in gRPC terms; the others' errors reach callers through ledgerError
				err = ledgerError(err)
			}
			if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "etcd at "+cluster.Endpoints()[0]) {
				t.Errorf("%s without quorum: %v %q; want UNAVAILABLE naming etcd", s.name, st.Code(), st.Message())
			}
			t.Logf("%s without quorum answered after %s at most: %v", s.name, time.Since(start).Round(time.Millisecond), err)
		case <-watchdog:
			t.Fatalf("%s without quorum has not answered after 30 s (request timeout %s)", s.name, timeout)
		}
	}

	cluster.Restart(1)
	cluster.WaitHealthy(1)
	if r, ok, err := l.Lookup(ctx, Volume, "vol-1"); err != nil || !ok || r.Tenant != "blue" {
		t.Errorf("with quorum back Lookup = %+v, %t, %v", r, ok, err)
	}
	res, err := l.reserve(ctx, "blue", 1, mib, "")
	if err != nil {
		t.Fatalf("with quorum back: %v", err)
	}
	if u := l.usageNow("blue"); u != (usage{2, 2 * mib}) {
		t.Errorf("with quorum back blue's usage = %+v; want the volume and the new hold (the one released during the outage deleted)", u)
	}
	res.release()
}

// TestEtcdLockWaitSeesQuorumLost: an operation waiting for another replica's identical one
// (watching its keys) when etcd loses its quorum answers UNAVAILABLE naming etcd within a
// few request timeouts, though its caller set no deadline: a watch alone says nothing while
// etcd has no leader. (The chaos test's waiters ran into their callers' deadlines.)
func TestEtcdLockWaitSeesQuorumLost(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	const timeout = time.Second
	open := func() *Ledger {
		return openEtcdLedger(t, cluster, "/wait/", nil, func(c *EtcdConfig) { c.RequestTimeout = timeout })
	}
	holder, waiter := open(), open()
	var seen observed
	waiter.Observe(&seen)
	inFlight := lockOf("blue/volume-name:pvc-1", "CreateVolume", "", time.Now().Add(time.Hour))
	lockOrFail(t, holder, inFlight)
	answer := make(chan error, 1)
	go func() {
		_, _, err := waiter.LockOperation(context.Background(), inFlight)
		answer <- err
	}()
	for requests, _ := seen.counts(); requests["Txn"] == 0; requests, _ = seen.counts() {
		time.Sleep(10 * time.Millisecond) // until its lock was refused: it waits
	}
	time.Sleep(timeout / 2) // its watch is established
	cluster.Stop(1)
	cluster.Stop(2)
	lost := time.Now()
	select {
	case err := <-answer:
		// Its watch says nothing until etcd ends it (several election timeouts: 7 s here);
		// a quorum read every request timeout fails within two.
		if took := time.Since(lost); took > 5*timeout {
			t.Errorf("the waiting operation answered %s after etcd lost its quorum; want within a few request timeouts (%s)", took.Round(time.Millisecond), timeout)
		}
		if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "etcd at "+cluster.Endpoints()[0]) {
			t.Errorf("the waiting operation without quorum: %v %q; want UNAVAILABLE naming etcd", st.Code(), st.Message())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the waiting operation has not answered 30 s after etcd lost its quorum (request timeout %s)", timeout)
	}
}

// TestEtcdStepsAnswerBeforeTheirDeadline: without quorum, a ledger step whose caller's
// deadline comes before the request timeout answers UNAVAILABLE naming etcd, a margin before
// that deadline (requestMargin), not at it, where the caller would see only DEADLINE_EXCEEDED.
func TestEtcdStepsAnswerBeforeTheirDeadline(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	l := openEtcdLedger(t, cluster, "/margin/", map[string]Quota{"blue": {MaxVolumes: 10}},
		func(c *EtcdConfig) { c.RequestTimeout = 10 * time.Second })
	if err := l.Record(t.Context(), Volume, "vol-1", Record{Tenant: "blue", Name: "blue.pvc-1"}); err != nil {
		t.Fatal(err)
	}
	cluster.Stop(1)
	cluster.Stop(2)
	steps := map[string]func(ctx context.Context) error{
		"Lookup":  func(ctx context.Context) error { _, _, err := l.Lookup(ctx, Volume, "vol-1"); return ledgerError(err) },
		"reserve": func(ctx context.Context) error { _, err := l.reserve(ctx, "blue", 1, 0, "blue.pvc-2"); return err },
		"LockOperation": func(ctx context.Context) error {
			_, _, err := l.LockOperation(ctx, lockOf("blue/volume:vol-1", "DeleteVolume", "", time.Now().Add(time.Minute)))
			return err
		},
	}
	var wg sync.WaitGroup
	for name, step := range steps {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := step(ctx)
			// At the deadline itself the lock would answer its caller's DEADLINE_EXCEEDED.
			if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "etcd at "+cluster.Endpoints()[0]) {
				t.Errorf("%s without quorum: %v %q; want UNAVAILABLE naming etcd", name, st.Code(), st.Message())
			}
		})
	}
	wg.Wait()
}

// TestEtcdUnlockKeepsItsCallsDeadline: giving a lock back while etcd has no quorum does not
// hold the operation's call past its deadline (the delete goes on without it, and the keys
// are deleted later): the call's answer, ready, reaches its caller.
func TestEtcdUnlockKeepsItsCallsDeadline(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	l := openEtcdLedger(t, cluster, "/unlock/", nil, func(c *EtcdConfig) { c.RequestTimeout = 10 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	dl, _ := ctx.Deadline()
	unlock, _, err := l.LockOperation(ctx, lockOf("blue/volume:vol-1", "DeleteVolume", "", dl))
	if err != nil {
		t.Fatal(err)
	}
	cluster.Stop(1)
	cluster.Stop(2)
	left, start := time.Until(dl), time.Now()
	unlock()
	// It returns a margin before the deadline (at once if that has passed); a loaded machine
	// may add a little. Without the bound it waits for etcd's answer: "no leader", seconds
	// later, or the request timeout (10 s).
	if took := time.Since(start); took > max(left, 0)+time.Second {
		t.Errorf("unlocking without quorum took %s with %s left to its call's deadline", took.Round(time.Millisecond), left.Round(time.Millisecond))
	}
}

// TestEtcdReleaseKeepsItsCallsDeadline: giving a quota hold back while etcd has no quorum
// does not hold the call past its deadline either (a failed create's deferred release ran a
// whole request timeout past it, and the chaos test's callers saw DEADLINE_EXCEEDED).
func TestEtcdReleaseKeepsItsCallsDeadline(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	l := openEtcdLedger(t, cluster, "/release/", map[string]Quota{"blue": {MaxVolumes: 10}},
		func(c *EtcdConfig) { c.RequestTimeout = 10 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	dl, _ := ctx.Deadline()
	res, err := l.reserve(ctx, "blue", 1, 0, "blue.pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	cluster.Stop(1)
	cluster.Stop(2)
	left, start := time.Until(dl), time.Now()
	res.release()
	// As unlocking: a margin before the deadline; without the bound, the request timeout.
	if took := time.Since(start); took > max(left, 0)+time.Second {
		t.Errorf("releasing without quorum took %s with %s left to its call's deadline", took.Round(time.Millisecond), left.Round(time.Millisecond))
	}
}
