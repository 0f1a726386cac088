package tenancy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// EtcdConfig is where and how an EtcdStore reaches etcd.
type EtcdConfig struct {
	// Endpoints are the etcd members' client URLs (https://host:2379, or host:port).
	Endpoints []string
	// TLS, when not nil, verifies etcd's certificates and presents the gateway's; the store
	// closes it.
	TLS *tlsconf.Client
	// Prefix is the key prefix of this gateway's state; replicas of one central gateway
	// share it. Default "/csi-gateway/".
	Prefix string
	// LeaseTTL is how long a replica's quota holds outlive it (its lease's TTL). Default 10s.
	LeaseTTL time.Duration
	// RequestTimeout bounds each request to etcd. Default 5s.
	RequestTimeout time.Duration
}

// The EtcdConfig defaults.
const (
	DefaultEtcdPrefix         = "/csi-gateway/"
	DefaultEtcdLeaseTTL       = 10 * time.Second
	DefaultEtcdRequestTimeout = 5 * time.Second
)

// etcdStore is the Store of replicated central gateways: every replica reads and writes the
// same keys under the prefix, and every change is one etcd transaction that compares the mod
// revisions of the keys it read, retried from a fresh read when another replica got there
// first. The keys:
//
//	PREFIX objects/KIND/BACKEND-ID      a Record (JSON)
//	PREFIX names/KIND/BACKEND-NAME      the backend ID
//	PREFIX tenants/TENANT/usage         the tenant's recorded volumes and bytes
//	PREFIX tenants/TENANT/holds/ID      a hold of an expansion in flight, bound to its replica's lease
//	PREFIX tenants/TENANT/creates/NAME  a hold of a create of the backend name NAME (escaped), bound to no lease
//	PREFIX owned/TENANT/KIND/BACKEND-ID the index of the tenant's records (store_owned.go)
//
// (The operations in flight on each object, bound to the replicas' leases too, go under
// PREFIX ops/, beside these: see oplock_etcd.go; and `ledger migrate`'s fence, PREFIX fence,
// which every write transaction compares absent: fence.go.)
//
// A hold is admitted by a transaction that puts its key only if no key under
// tenants/TENANT/ has changed since the usage the quota was checked against was read (a
// compare on the prefix's mod revisions): two replicas checking the same usage cannot both
// put a hold, whatever the interleaving, so holds never overshoot a quota. Turning a hold
// into recorded usage (record) deletes the hold and raises the usage in one transaction. An
// expansion's hold carries its replica's lease, so it vanishes when the replica dies (within
// LeaseTTL) or closes. A create's hold does not: the backend call of a replica that died may
// have created the volume, unrecorded, so the hold counts it until a create of the same name
// takes the hold over (rather than holding the room twice) and records the volume, or fails
// with an answer that says nothing was created.
// (Deleting a key does not change the others' mod revisions; only a hold's release, its
// lease's expiry and its turning into usage delete keys there, and none of them takes room.)
type etcdStore struct {
	client  *clientv3.Client
	tls     *tlsconf.Client // nil without TLS
	prefix  string
	ttl     time.Duration
	timeout time.Duration
	where   string // the endpoints, for errors

	life    context.Context // ended by Close: the lease's keep-alive
	endLife context.CancelFunc
	seq     atomic.Uint64 // numbers this replica's holds
	// observer, if set, is told of each request and lost lease (store_observe.go).
	observer atomic.Pointer[StoreObserver]
	closing  sync.Once

	mu    sync.Mutex
	lease clientv3.LeaseID // 0: none granted yet, or lost
	stale []string         // hold keys whose release failed, deleted at the next hold

	health etcdHealth // whether etcd answers (store_etcd_health.go)
}

// OpenEtcd returns a Store in etcd. It does not wait for etcd: a call that needs the store
// while etcd cannot be reached fails (UNAVAILABLE, naming etcd) within RequestTimeout.
func OpenEtcd(cfg EtcdConfig) (Store, error) {
	s := &etcdStore{
		tls:     cfg.TLS,
		prefix:  cmp.Or(cfg.Prefix, DefaultEtcdPrefix),
		ttl:     cmp.Or(cfg.LeaseTTL, DefaultEtcdLeaseTTL),
		timeout: cmp.Or(cfg.RequestTimeout, DefaultEtcdRequestTimeout),
		where:   strings.Join(cfg.Endpoints, ","),
	}
	ccfg := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: s.timeout,
		// Its errors reach callers (UNAVAILABLE naming etcd); its own log would repeat them.
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(s.observeRequests)},
	}
	if len(cfg.Endpoints) == 0 {
		s.closeTLS()
		return nil, errors.New("etcd: no endpoints")
	}
	if cfg.TLS != nil {
		ccfg.TLS = cfg.TLS.Config()
	}
	client, err := clientv3.New(ccfg)
	if err != nil {
		s.closeTLS()
		return nil, fmt.Errorf("etcd at %s: %w", s.where, err)
	}
	s.client = client
	s.life, s.endLife = context.WithCancel(context.Background())
	return s, nil
}

// Close revokes the replica's lease, so its holds vanish at once rather than at its expiry,
// and closes the client. Later calls do nothing.
func (s *etcdStore) Close() error {
	var err error
	s.closing.Do(func() { err = s.close() })
	return err
}

func (s *etcdStore) close() error {
	s.mu.Lock()
	lease := s.lease // before ending the keep-alive, whose end forgets the lease
	s.lease = 0
	s.mu.Unlock()
	s.endLife()
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		s.client.Revoke(ctx, lease) // if etcd is unreachable the lease expires instead
		cancel()
	}
	err := s.client.Close()
	s.closeTLS()
	return err
}

func (s *etcdStore) closeTLS() {
	if s.tls != nil {
		s.tls.Close()
	}
}

func (s *etcdStore) objectKey(kind Kind, id string) string {
	return s.prefix + "objects/" + strconv.Itoa(int(kind)) + "/" + id
}

func (s *etcdStore) nameKey(kind Kind, name string) string {
	return s.prefix + "names/" + strconv.Itoa(int(kind)) + "/" + name
}

func (s *etcdStore) tenantsPrefix() string { return s.prefix + "tenants/" }

// tenantPrefix is where a tenant's usage and holds are (tenant names hold no '/').
func (s *etcdStore) tenantPrefix(tenant string) string { return s.tenantsPrefix() + tenant + "/" }

func (s *etcdStore) usageKey(tenant string) string { return s.tenantPrefix(tenant) + "usage" }

// fail names etcd in an error of one of its requests, and the timeout when that ran out.
func (s *etcdStore) fail(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("etcd at %s did not answer within %s (its request timeout): %w", s.where, s.timeout, err)
	}
	return fmt.Errorf("etcd at %s: %w", s.where, err)
}

// requestMargin is what a request to etcd leaves of its caller's deadline (a tenth of the
// time left, when that is less): a step that etcd does not answer fails (UNAVAILABLE, naming
// etcd) while the caller still waits for its answer, rather than at the deadline itself,
// where the caller sees only DEADLINE_EXCEEDED.
const requestMargin = time.Second

// beforeDeadline is how long a request to etcd (or a wait for one) may take within ctx's
// deadline: what is left of it less the margin; ok is false when ctx has no deadline.
func beforeDeadline(ctx context.Context) (d time.Duration, ok bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	left := time.Until(dl)
	return left - min(requestMargin, left/10), true
}

// awaitWithin runs do and waits for it until the margin before ctx's deadline at the latest
// (beforeDeadline; for as long as it takes without a deadline): do goes on without the call,
// so that a call whose answer is ready is not held past its deadline by an etcd that does
// not answer a step that need not delay it (giving a lock or a hold back).
func awaitWithin(ctx context.Context, do func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		do()
	}()
	var late <-chan time.Time
	if d, ok := beforeDeadline(ctx); ok {
		t := time.NewTimer(d)
		defer t.Stop()
		late = t.C
	}
	select {
	case <-done:
	case <-late:
	}
}

// ready makes a linearizable read, which needs a leader and a quorum's answer.
func (s *etcdStore) ready(ctx context.Context) error {
	return s.request(ctx, func(ctx context.Context) error {
		_, err := s.client.Get(ctx, s.prefix, clientv3.WithCountOnly())
		return err
	})
}

// read gets keys at one revision; kvs[i] is nil for a key that does not exist.
func (s *etcdStore) read(ctx context.Context, keys ...string) (kvs []*mvccpb.KeyValue, err error) {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(k)
	}
	var resp *clientv3.TxnResponse
	if err := s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Txn(ctx).Then(ops...).Commit()
		return err
	}); err != nil {
		return nil, err
	}
	kvs = make([]*mvccpb.KeyValue, len(keys))
	for i, r := range resp.Responses {
		if got := r.GetResponseRange().GetKvs(); len(got) > 0 {
			kvs[i] = got[0]
		}
	}
	return kvs, nil
}

// readPrefix gets every key under prefix and the revision it read them at.
func (s *etcdStore) readPrefix(ctx context.Context, prefix string) ([]*mvccpb.KeyValue, int64, error) {
	var resp *clientv3.GetResponse
	if err := s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Get(ctx, prefix, clientv3.WithPrefix())
		return err
	}); err != nil {
		return nil, 0, err
	}
	return resp.Kvs, resp.Header.Revision, nil
}

// commit runs ops if every compare holds and the ledger is not fenced (fence.go), and reports
// whether they did; a fenced ledger is an error.
func (s *etcdStore) commit(ctx context.Context, cmps []clientv3.Cmp, ops ...clientv3.Op) (bool, error) {
	var resp *clientv3.TxnResponse
	if err := s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Txn(ctx).If(append(cmps, s.notFenced())...).Then(ops...).Else(s.readFence()).Commit()
		return err
	}); err != nil {
		return false, err
	}
	if !resp.Succeeded {
		return false, s.fenced(resp.Responses[0])
	}
	return true, nil
}

// update runs attempt until it commits: each attempt reads what it needs and commits only if
// none of it changed since (another replica's write makes it start over).
func (s *etcdStore) update(ctx context.Context, attempt func() (committed bool, err error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return s.fail(err)
		}
		if ok, err := attempt(); err != nil || ok {
			return err
		}
	}
}

// unchanged compares a key's mod revision with the one read (0: the key did not exist).
func unchanged(key string, kv *mvccpb.KeyValue) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(key), "=", modRevision(kv))
}

func modRevision(kv *mvccpb.KeyValue) int64 {
	if kv == nil {
		return 0
	}
	return kv.ModRevision
}

func decodeRecord(kv *mvccpb.KeyValue) (*Record, error) {
	if kv == nil {
		return nil, nil
	}
	r := new(Record)
	if err := json.Unmarshal(kv.Value, r); err != nil {
		return nil, fmt.Errorf("record %q: %w", kv.Key, err)
	}
	return r, nil
}

func encodeUsage(u usage) string { return string(encodeHold(u, time.Time{})) }

// decodeUsage reads a usage or a hold (holdJSON).
func decodeUsage(kv *mvccpb.KeyValue) (usage, error) {
	h, err := decodeHold(kv)
	return h.usage(), err
}

func decodeHold(kv *mvccpb.KeyValue) (holdJSON, error) {
	var h holdJSON
	if kv == nil {
		return h, nil
	}
	if err := json.Unmarshal(kv.Value, &h); err != nil {
		return h, fmt.Errorf("usage %q: %w", kv.Key, err)
	}
	return h, nil
}

func (s *etcdStore) lookup(ctx context.Context, kind Kind, backendID string) (Record, bool, error) {
	kvs, err := s.read(ctx, s.objectKey(kind, backendID))
	if err != nil {
		return Record{}, false, err
	}
	r, err := decodeRecord(kvs[0])
	if err != nil || r == nil {
		return Record{}, false, err
	}
	return *r, true, nil
}

func (s *etcdStore) byName(ctx context.Context, kind Kind, name string) (string, bool, error) {
	kvs, err := s.read(ctx, s.nameKey(kind, name))
	if err != nil || kvs[0] == nil {
		return "", false, err
	}
	return string(kvs[0].Value), true, nil
}

func (s *etcdStore) record(ctx context.Context, kind Kind, backendID string, r Record, h *hold) error {
	objKey, usageKey := s.objectKey(kind, backendID), s.usageKey(r.Tenant)
	return s.update(ctx, func() (bool, error) {
		keys := []string{objKey, usageKey}
		if r.Name != "" { // a create's record: its name's entry is read with the rest
			keys = append(keys, s.nameKey(kind, r.Name))
		}
		kvs, err := s.read(ctx, keys...)
		if err != nil {
			return false, err
		}
		old, err := decodeRecord(kvs[0])
		if err != nil {
			return false, err
		}
		merged, err := merge(old, r)
		if err != nil {
			return false, err
		}
		v, err := json.Marshal(merged)
		if err != nil {
			return false, err
		}
		cmps := []clientv3.Cmp{unchanged(objKey, kvs[0])}
		ops := []clientv3.Op{clientv3.OpPut(objKey, string(v)), s.indexOwned(kind, backendID, merged)}
		delta := change(kind, old, merged)
		if merged.Name != "" {
			nameKey := s.nameKey(kind, merged.Name)
			var entry *mvccpb.KeyValue
			if r.Name != "" {
				entry = kvs[2]
			} else { // a record that names nothing keeps the old record's name
				named, err := s.read(ctx, nameKey)
				if err != nil {
					return false, err
				}
				entry = named[0]
			}
			stale, staleCmps, staleOps, err := s.replacing(ctx, kind, backendID, merged, nameKey, entry)
			if err != nil {
				return false, err
			}
			cmps, ops = append(cmps, staleCmps...), append(ops, staleOps...)
			ops = append(ops, clientv3.OpPut(nameKey, backendID))
			if stale != nil {
				delta = delta.minus(change(kind, nil, *stale))
			}
		}
		if delta != (usage{}) {
			used, err := decodeUsage(kvs[1])
			if err != nil {
				return false, err
			}
			cmps = append(cmps, unchanged(usageKey, kvs[1]))
			ops = append(ops, clientv3.OpPut(usageKey, encodeUsage(used.plus(delta))))
		}
		if h != nil {
			ops = append(ops, clientv3.OpDelete(h.key))
		}
		return s.commit(ctx, cmps, ops...)
	})
}

// replacing returns the record a record of r replaces (replaced), if any, given the name's
// entry as read (nameKey: entry), with the compares that what it read is unchanged and the ops
// that forget the replaced record (its name's entry is rewritten by the caller).
func (s *etcdStore) replacing(ctx context.Context, kind Kind, backendID string, r Record, nameKey string, entry *mvccpb.KeyValue) (*Record, []clientv3.Cmp, []clientv3.Op, error) {
	cmps := []clientv3.Cmp{unchanged(nameKey, entry)}
	if entry == nil || string(entry.Value) == backendID {
		return nil, cmps, nil, nil
	}
	staleID := string(entry.Value)
	staleKey := s.objectKey(kind, staleID)
	skv, err := s.read(ctx, staleKey)
	if err != nil {
		return nil, nil, nil, err
	}
	stale, err := decodeRecord(skv[0])
	if err != nil || replaced(kind, backendID, r, staleID, stale) == nil {
		return nil, cmps, nil, err
	}
	return stale, append(cmps, unchanged(staleKey, skv[0])),
		[]clientv3.Op{clientv3.OpDelete(staleKey), s.unindexOwned(kind, staleID, *stale)}, nil
}

func (s *etcdStore) forget(ctx context.Context, kind Kind, backendID string) error {
	objKey := s.objectKey(kind, backendID)
	return s.update(ctx, func() (bool, error) {
		kvs, err := s.read(ctx, objKey)
		if err != nil {
			return false, err
		}
		old, err := decodeRecord(kvs[0])
		if err != nil || old == nil {
			return old == nil, err
		}
		cmps := []clientv3.Cmp{unchanged(objKey, kvs[0])}
		ops := []clientv3.Op{clientv3.OpDelete(objKey), s.unindexOwned(kind, backendID, *old)}
		if old.Name != "" {
			// Only if it still names this object: another may have been recorded under
			// the name since (a group snapshot's record is not replaced, nor was any
			// before records replaced their name's stale one).
			nameKey := s.nameKey(kind, old.Name)
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(nameKey), "=", backendID)}, []clientv3.Op{clientv3.OpDelete(nameKey)}, nil))
		}
		if delta := change(kind, nil, *old); delta != (usage{}) {
			usageKey := s.usageKey(old.Tenant)
			ukv, err := s.read(ctx, usageKey)
			if err != nil {
				return false, err
			}
			used, err := decodeUsage(ukv[0])
			if err != nil {
				return false, err
			}
			cmps = append(cmps, unchanged(usageKey, ukv[0]))
			ops = append(ops, clientv3.OpPut(usageKey, encodeUsage(used.minus(delta))))
		}
		return s.commit(ctx, cmps, ops...)
	})
}

func (s *etcdStore) hold(ctx context.Context, tenant string, want usage, create string, admit func(usage) error) (*hold, error) {
	s.deleteStale(ctx)
	prefix := s.tenantPrefix(tenant)
	var h *hold
	err := s.update(ctx, func() (bool, error) {
		kvs, rev, err := s.readPrefix(ctx, prefix)
		if err != nil {
			return false, err
		}
		key, opts, adopted, lease := "", []clientv3.OpOption(nil), false, clientv3.LeaseID(0)
		value := encodeUsage(want)
		if create != "" {
			// A create's hold, keyed by its name and bound to no lease: it outlives its
			// replica, whose backend call may have created the volume, until a create of
			// the name is recorded (or fails). A create of a name that has one takes it
			// over rather than holding the room twice.
			key, value = s.createHoldKey(tenant, create), string(encodeHold(want, time.Now()))
			kvs = slices.DeleteFunc(kvs, func(kv *mvccpb.KeyValue) bool {
				adopted = adopted || string(kv.Key) == key
				return string(kv.Key) == key
			})
		} else {
			if lease, err = s.currentLease(ctx); err != nil {
				return false, err
			}
			key, opts = fmt.Sprintf("%sholds/%x-%d", prefix, int64(lease), s.seq.Add(1)), []clientv3.OpOption{clientv3.WithLease(lease)}
		}
		used, err := sumUsage(kvs)
		if err != nil {
			return false, err
		}
		if err := admit(used); err != nil {
			return false, err
		}
		// No key under the tenant's prefix written since rev: no other hold, and no change of
		// the recorded usage, came between the check and this hold.
		notSince := clientv3.Compare(clientv3.ModRevision(prefix), "<", rev+1).WithPrefix()
		var resp *clientv3.TxnResponse
		err = s.request(ctx, func(ctx context.Context) (err error) {
			resp, err = s.client.Txn(ctx).If(notSince, s.notFenced()).Then(clientv3.OpPut(key, value, opts...)).Else(s.readFence()).Commit()
			return err
		})
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.dropLease(lease) // expired while this replica was cut off: take a new one
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !resp.Succeeded {
			return false, s.fenced(resp.Responses[0]) // nil: another write came first, check again
		}
		h = &hold{tenant: tenant, key: key, usage: want, rev: resp.Header.Revision, adopted: adopted}
		return true, nil
	})
	return h, err
}

// createHoldKey is where the hold of a create of the backend name is.
func (s *etcdStore) createHoldKey(tenant, name string) string {
	return s.tenantPrefix(tenant) + "creates/" + url.PathEscape(name)
}

func (s *etcdStore) createHeld(ctx context.Context, tenant, name string) (usage, error) {
	kvs, err := s.read(ctx, s.createHoldKey(tenant, name))
	if err != nil {
		return usage{}, err
	}
	return decodeUsage(kvs[0])
}

// release deletes a hold whose call failed. A create's hold that took over an earlier
// create's of the same name stays (that create's outcome is still unknown), and so does one
// another create of the name has taken over since (its revision changed).
func (s *etcdStore) release(h *hold) {
	if h.adopted {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	var err error
	if h.rev != 0 && strings.Contains(h.key, "/creates/") {
		_, err = s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(h.key), "=", h.rev)).Then(clientv3.OpDelete(h.key)).Commit()
	} else {
		_, err = s.client.Delete(ctx, h.key)
	}
	if err != nil && !strings.Contains(h.key, "/creates/") {
		s.mu.Lock()
		s.stale = append(s.stale, h.key)
		s.mu.Unlock()
	}
}

// deleteStale deletes the holds whose release failed (etcd was unreachable), so that they
// do not outlive their calls for as long as the replica lives.
func (s *etcdStore) deleteStale(ctx context.Context) {
	s.mu.Lock()
	keys := s.stale
	s.stale = nil
	s.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpDelete(k)
	}
	if _, err := s.commit(ctx, nil, ops...); err != nil {
		s.mu.Lock()
		s.stale = append(s.stale, keys...)
		s.mu.Unlock()
	}
}

// currentLease returns the replica's lease, granting it (and keeping it alive until Close)
// when there is none yet or it was lost.
//
// The grant is made without holding s.mu: a call does not queue behind other calls' grants
// (each up to a request timeout while etcd is down) past its own deadline. Calls that find no
// lease at once each grant one; the first kept wins and the others are revoked.
func (s *etcdStore) currentLease(ctx context.Context) (clientv3.LeaseID, error) {
	s.mu.Lock()
	lease := s.lease
	s.mu.Unlock()
	if lease != 0 {
		return lease, nil
	}
	var resp *clientv3.LeaseGrantResponse
	if err := s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Grant(ctx, int64((max(time.Second, s.ttl)+time.Second-1)/time.Second)) // whole seconds, rounded up
		return err
	}); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != 0 {
		s.revokeLater(resp.ID)
		return s.lease, nil
	}
	alive, err := s.client.KeepAlive(s.life, resp.ID)
	if err != nil {
		return 0, s.fail(err)
	}
	go func() {
		for range alive {
		}
		s.leaseLost()        // unless the store closed
		s.dropLease(resp.ID) // expired, revoked, or the store closed
	}()
	s.lease = resp.ID
	return resp.ID, nil
}

// dropLease forgets a lost lease, so that the next hold takes a new one.
func (s *etcdStore) dropLease(id clientv3.LeaseID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == id {
		s.lease = 0
	}
}

// sumUsage adds up a tenant's recorded usage and holds (the keys under its prefix).
func sumUsage(kvs []*mvccpb.KeyValue) (usage, error) {
	var total usage
	for _, kv := range kvs {
		u, err := decodeUsage(kv)
		if err != nil {
			return usage{}, err
		}
		total = total.plus(u)
	}
	return total, nil
}

func (s *etcdStore) usage(ctx context.Context, tenant string) (usage, error) {
	kvs, _, err := s.readPrefix(ctx, s.tenantPrefix(tenant))
	if err != nil {
		return usage{}, err
	}
	return sumUsage(kvs)
}

func (s *etcdStore) usages(ctx context.Context) (map[string]usage, error) {
	kvs, _, err := s.readPrefix(ctx, s.tenantsPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]usage{}
	for _, kv := range kvs {
		tenant, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), s.tenantsPrefix()), "/")
		u, err := decodeUsage(kv)
		if err != nil {
			return nil, err
		}
		out[tenant] = out[tenant].plus(u)
	}
	return out, nil
}

// eachPage is how many records each reads from etcd per request.
const eachPage = 1000

// each reads the records a page at a time, every page at the first page's revision.
func (s *etcdStore) each(ctx context.Context, fn func(Kind, string, Record) error) error {
	objects := s.prefix + "objects/"
	end := clientv3.GetPrefixRangeEnd(objects)
	from, rev := objects, int64(0)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(eachPage), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		var resp *clientv3.GetResponse
		if err := s.request(ctx, func(ctx context.Context) (err error) {
			resp, err = s.client.Get(ctx, from, opts...)
			return err
		}); err != nil {
			return err
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			kindText, id, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), objects), "/")
			kind, err := strconv.Atoi(kindText)
			if !ok || err != nil {
				return fmt.Errorf("etcd key %q is not an object's", kv.Key)
			}
			r, err := decodeRecord(kv)
			if err != nil {
				return err
			}
			if err := fn(Kind(kind), id, *r); err != nil {
				return err
			}
		}
		if !resp.More {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
