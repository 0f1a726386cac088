package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// The etcd store's configuration and constants the chaos rig's lock bounds derive from.
const (
	// chaosLeaseTTL is the replicas' leaseTTL (etcdStoreYAML): a dead replica's "holder"
	// keys go at most that long after its last keep-alive.
	chaosLeaseTTL = 3 * time.Second
	// chaosUntilSlack is the store's untilSlack (proxy/tenancy/oplock_etcd.go): an "until"
	// lease's TTL is the time left to the call's deadline plus it, rounded up to whole
	// seconds, so an "until" key never goes before deadline + chaosUntilSlack.
	chaosUntilSlack = time.Second
	// chaosLockLinger is how long the store says a dead holder's lock may outlive its call's
	// deadline: the slack and etcd's rounding of TTLs up to whole seconds.
	chaosLockLinger = chaosUntilSlack + time.Second
	// chaosElectionTimeout is the etcd members' --election-timeout (testutil.StartEtcd).
	chaosElectionTimeout = 2 * time.Second
)

// chaosLockWatch records, from etcd, the life of every operation lock the replicas take
// (the keys under PREFIX ops/, proxy/tenancy/oplock_etcd.go): a watch of the prefix from
// before the load, on the one member the chaos tests never stop, so that it is never cut.
// Times are when the watch received an event: at most the watch's delivery after etcd
// applied it. Revisions order the events exactly.
type chaosLockWatch struct {
	client *clientv3.Client
	prefix string // the locks': PREFIX ops/

	mu    sync.Mutex
	locks map[string]*chaosLock // an operation's name (PREFIX ops/OBJECT/SLOT/LEASE-N/) → its lock
	err   error                 // why the watch ended before the test did
}

// chaosLock is one operation's lock, as the watch saw its keys ("holder" and "until").
type chaosLock struct {
	object   string    // the serializer's key of the object: "blue/volume-name:pvc-3"
	deadline time.Time // its call's
	keys     int       // its keys that exist
	putRev   int64     // the revision that put its first key
	goneRev  int64     // the revision that deleted its last key; 0 while one is left
	gone     time.Time // when the watch saw its last key deleted
}

// watchChaosLocks starts watching the operation locks the replicas' store (prefix: the
// ledger's, as in etcdStoreYAML) keeps in cluster, through member 0; the test's cleanup ends
// the watch.
func watchChaosLocks(t *testing.T, cluster *testutil.EtcdCluster, prefix string) *chaosLockWatch {
	t.Helper()
	if !strings.Contains(etcdStoreYAML(cluster), fmt.Sprintf("leaseTTL: %s", chaosLeaseTTL)) {
		t.Fatalf("the chaos rig's lock bounds assume leaseTTL %s: update chaosLeaseTTL to etcdStoreYAML's", chaosLeaseTTL)
	}
	tc, err := tlsconf.NewClient(tlsconf.ClientFiles{CA: cluster.CA, Cert: cluster.Cert, Key: cluster.Key, ServerName: cluster.ServerName})
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints()[:1], TLS: tc.Config(), DialTimeout: 20 * time.Second})
	if err != nil {
		tc.Close()
		t.Fatal(err)
	}
	w := &chaosLockWatch{client: client, prefix: prefix + "ops/", locks: map[string]*chaosLock{}}
	ctx, cancel := context.WithCancel(context.Background())
	from, err := w.revision(ctx)
	if err != nil {
		t.Fatalf("reading etcd's revision: %v", err)
	}
	changes := client.Watch(ctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(from+1))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for resp := range changes {
			w.record(resp, time.Now())
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		client.Close()
		tc.Close()
	})
	return w
}

// revision is etcd's revision now: every change made before the call is at or below it.
func (w *chaosLockWatch) revision(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := w.client.Get(ctx, w.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// record applies one watch response, received at now.
func (w *chaosLockWatch) record(resp clientv3.WatchResponse, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := resp.Err(); err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	for _, ev := range resp.Events {
		key := strings.TrimPrefix(string(ev.Kv.Key), w.prefix)
		i := strings.LastIndexByte(key, '/')
		if i < 0 {
			continue
		}
		name := key[:i]
		l := w.locks[name]
		switch {
		case ev.IsCreate():
			if l == nil {
				l = &chaosLock{putRev: ev.Kv.ModRevision}
				l.object, _ = url.PathUnescape(strings.SplitN(key, "/", 2)[0])
				var v struct {
					Deadline time.Time `json:"d"` // the store's lockValue
				}
				json.Unmarshal(ev.Kv.Value, &v)
				l.deadline = v.Deadline
				w.locks[name] = l
			}
			l.keys++
		case ev.Type == clientv3.EventTypeDelete && l != nil:
			if l.keys--; l.keys == 0 {
				l.goneRev, l.gone = ev.Kv.ModRevision, now
			}
		}
	}
}

// heldAt is the lock of object that existed at revision rev, or nil.
func (w *chaosLockWatch) heldAt(object string, rev int64) *chaosLock {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.locks {
		if l.object == object && l.putRev <= rev && (l.goneRev == 0 || l.goneRev > rev) {
			c := *l
			return &c
		}
	}
	return nil
}

// overlapping are the other locks of l's object put while l existed: none, if the lock held.
func (w *chaosLockWatch) overlapping(l *chaosLock) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, o := range w.locks {
		if o.object == l.object && o.putRev > l.putRev && (l.goneRev == 0 || o.putRev < l.goneRev) {
			n++
		}
	}
	return n
}

// chaosKilledCall is a create a killed replica had in flight at the backend, and its lock.
type chaosKilledCall struct {
	call backendCall
	lock *chaosLock // nil: not found
	next *backendCall
}

// lockObjectOf is the serializer's key of the name a create at the driver was made under
// (the driver sees the backend's name, TENANT.NAME); "" for a call that is not a create.
func lockObjectOf(c backendCall) string {
	kind, ok := map[string]string{"CreateVolume": "volume-name:", "CreateSnapshot": "snapshot-name:"}[c.method]
	tenant, name, found := strings.Cut(c.object, ".")
	if !ok || !found {
		return ""
	}
	return tenant + "/" + kind + name
}

// killedCalls are, for every kill, the creates the killed replica had in flight at the driver,
// each with the lock its operation held in etcd at the kill (k.rev) and the first call of
// another process for the same name that reached the driver after it.
func (r *chaosRig) killedCalls() []chaosKilledCall {
	r.driver.mu.Lock()
	defer r.driver.mu.Unlock()
	var killed []chaosKilledCall
	for _, k := range r.kills {
		for _, c := range r.driver.calls {
			object := lockObjectOf(c)
			if c.pid != k.pid || object == "" || !c.start.Before(k.at) || c.end.Before(k.at) {
				continue
			}
			kc := chaosKilledCall{call: c, lock: r.locks.heldAt(object, k.rev)}
			for i := range r.driver.calls {
				n := &r.driver.calls[i]
				if n.pid != c.pid && n.method == c.method && n.object == c.object && n.start.After(c.start) && (kc.next == nil || n.start.Before(kc.next.start)) {
					kc.next = n
				}
			}
			killed = append(killed, kc)
		}
	}
	return killed
}

// checkKilledLocks logs, for every create a killed replica had in flight at the driver, when
// its backend call ended, its deadline, when etcd deleted its lock, and by how much the lock
// outlived the call, and returns the longest outlive. It fails the test on a lock it cannot
// find, one still there, one that lasted past its deadline by more than leaseTTL + the
// store's linger, another lock of the same object put while it existed, and another
// process's call for the name reaching the driver before the lock could end.
//
// The bound is generous, not a timing: the "until" key goes at most the linger after the
// deadline, the "holder" key at most leaseTTL after the kill, which came before the deadline;
// the sum leaves the smaller of the two as margin for etcd's checks of expired leases (every
// 500 ms) and the watch's delivery. When an etcd member was restarted meanwhile, a new leader
// may have renewed every lease (etcd's lessor.Promote: now + its whole TTL + an election
// timeout), and no lease expires while there is no leader: the bound then adds the "until"
// lease's whole TTL (the call's timeout and the linger), the renewal's election timeout and,
// for the election itself, generously four more.
func (r *chaosRig) checkKilledLocks(t *testing.T, callTimeout time.Duration) (longest time.Duration, n int) {
	t.Helper()
	r.locks.mu.Lock()
	werr := r.locks.err
	r.locks.mu.Unlock()
	if werr != nil {
		t.Errorf("the watch of the operation locks ended: %v", werr)
	}
	for _, kc := range r.killedCalls() {
		c, l := kc.call, kc.lock
		what := fmt.Sprintf("killed %s %s (pid %d, backend call %s–%s)", c.method, c.object, c.pid, c.start.Format("15:04:05.000"), c.end.Format("15:04:05.000"))
		if l == nil {
			t.Errorf("%s: no lock of its name in etcd at the kill", what)
			continue
		}
		if l.goneRev == 0 {
			t.Errorf("%s: its lock (deadline %s) is still in etcd", what, l.deadline.Format("15:04:05.000"))
			continue
		}
		n++
		outlive := l.gone.Sub(c.end)
		longest = max(longest, outlive)
		bound, why := chaosLeaseTTL+chaosLockLinger, "leaseTTL + linger"
		if r.etcdRestartedWithin(c.start, l.gone) {
			bound += callTimeout + chaosLockLinger + 5*chaosElectionTimeout
			why += ", and a renewal by a new etcd leader"
		}
		next := "none"
		if kc.next != nil {
			next = fmt.Sprintf("%s after the deletion", kc.next.start.Sub(l.gone).Round(time.Millisecond))
		}
		t.Logf("%s: deadline %s, lock deleted %s: outlived the backend call by %s, the deadline by %s (bound %s: %s); the next call of another process for the name arrived %s",
			what, l.deadline.Format("15:04:05.000"), l.gone.Format("15:04:05.000"), outlive.Round(time.Millisecond),
			l.gone.Sub(l.deadline).Round(time.Millisecond), bound, why, next)
		if l.gone.Sub(l.deadline) > bound {
			t.Errorf("%s: its lock outlived the deadline by %s, more than %s", what, l.gone.Sub(l.deadline), bound)
		}
		if o := r.locks.overlapping(l); o != 0 {
			t.Errorf("%s: %d other locks of %s were put while its lock existed", what, o, l.object)
		}
		// The lock's "until" key goes at deadline + chaosUntilSlack at the earliest: a sound
		// bound on the lock's end, unlike the watch's time of its deletion, which is late by
		// the watch's delivery.
		if kc.next != nil && kc.next.start.Before(l.deadline.Add(chaosUntilSlack)) {
			t.Errorf("%s: a call of process %d for the name reached the driver at %s, before its lock could end (%s)",
				what, kc.next.pid, kc.next.start.Format("15:04:05.000"), l.deadline.Add(chaosUntilSlack).Format("15:04:05.000"))
		}
	}
	return longest, n
}

// etcdRestartedWithin reports whether an etcd member was stopped or restarted between from
// and to (or within an election after).
func (r *chaosRig) etcdRestartedWithin(from, to time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.etcdRestarts {
		if e[0].Before(to) && e[1].Add(chaosElectionTimeout).After(from) {
			return true
		}
	}
	return false
}

// restartEtcdMember kills etcd member i and restarts it at once, waiting until it is healthy.
func (r *chaosRig) restartEtcdMember(i int) {
	stopped := time.Now()
	r.cluster.Stop(i)
	r.cluster.Restart(i)
	r.cluster.WaitHealthy(i)
	r.mu.Lock()
	r.etcdRestarts = append(r.etcdRestarts, [2]time.Time{stopped, time.Now()})
	r.mu.Unlock()
}
