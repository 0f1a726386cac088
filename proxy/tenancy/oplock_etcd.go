package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd lock of an object is the keys of the operations in flight on it:
//
//	PREFIX ops/OBJECT/all/LEASE-N/holder      an operation on the whole object
//	PREFIX ops/OBJECT/all/LEASE-N/until
//	PREFIX ops/OBJECT/at/SCOPE/LEASE-N/holder an operation on one attachment (node, target path)
//	PREFIX ops/OBJECT/at/SCOPE/LEASE-N/until
//
// (OBJECT and SCOPE path-escaped, so neither holds a '/'.) Both keys of an operation carry
// its method, scope, identity and deadline. "holder" is bound to the replica's lease: it
// lives while the replica does, and up to leaseTTL after it dies. "until" is bound to a lease
// of its own, granted for the time left to the operation's deadline and never renewed: it
// lives until the backend call cannot be running any more, whatever becomes of the replica.
// The object is locked while either exists, so a lock whose holder is gone lasts until the
// later of its lease's expiry and its call's deadline, and no longer. An operation without a
// deadline has no "until" key.
//
// The lock is taken by one transaction that puts both keys only if no key of a conflicting
// operation exists (a whole-object operation conflicts with every key under ops/OBJECT/; an
// attachment's with those under all/ and under its own at/SCOPE/), and returns the
// conflicting keys otherwise, with the revision a waiter watches from. It is given back by
// deleting both keys (the names are the operation's own: LEASE-N is unique), then revoking the
// "until" lease.

// untilSlack is added to an "until" lease's TTL: etcd counts TTLs in whole seconds, and the
// lease must not end before the deadline.
const untilSlack = time.Second

func (s *etcdStore) opsKey(object string) string {
	return s.prefix + "ops/" + url.PathEscape(object) + "/"
}

// slotKey is where op's keys go, under opsKey.
func slotKey(op Operation) string {
	if op.Scope == "" {
		return "all/"
	}
	return "at/" + url.PathEscape(op.Scope) + "/"
}

// freeOf is the transaction's condition that no operation conflicting with op is in flight.
func (s *etcdStore) freeOf(op Operation) []clientv3.Cmp {
	absent := func(prefix string) clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix()
	}
	base := s.opsKey(op.Object)
	if op.Scope == "" {
		return []clientv3.Cmp{absent(base)}
	}
	return []clientv3.Cmp{absent(base + "all/"), absent(base + slotKey(op))}
}

func (s *etcdStore) tryLock(ctx context.Context, op Operation) (func(), *Held, error) {
	s.deleteStale(ctx)
	value, err := json.Marshal(valueOf(op))
	if err != nil {
		return nil, nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, s.fail(err)
		}
		lease, err := s.currentLease(ctx)
		if err != nil {
			return nil, nil, err
		}
		until, err := s.grantUntil(ctx, op.Deadline)
		if err != nil {
			return nil, nil, err
		}
		name := s.opsKey(op.Object) + slotKey(op) + fmt.Sprintf("%x-%d/", int64(lease), s.seq.Add(1))
		ops := []clientv3.Op{clientv3.OpPut(name+"holder", string(value), clientv3.WithLease(lease))}
		if until != 0 {
			ops = append(ops, clientv3.OpPut(name+"until", string(value), clientv3.WithLease(until)))
		}
		var resp *clientv3.TxnResponse
		err = s.request(ctx, func(ctx context.Context) (err error) {
			resp, err = s.client.Txn(ctx).If(append(s.freeOf(op), s.notFenced())...).Then(ops...).
				Else(clientv3.OpGet(s.opsKey(op.Object), clientv3.WithPrefix()), s.readFence()).Commit()
			return err
		})
		switch {
		case err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound):
			// The transaction may have been applied though its answer was lost (a member
			// killed, a request timeout while etcd was slow): its "holder" key would lock the
			// object for as long as the replica lives. The operation does not run: delete them.
			go s.deleteOperation(name, until)
		case err != nil || !resp.Succeeded:
			s.revokeLater(until)
		}
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.dropLease(lease) // expired while this replica was cut off: take a new one
			continue
		case err != nil:
			return nil, nil, err
		case resp.Succeeded:
			return func() { s.unlock(ctx, name, until) }, nil, nil
		}
		if err := s.fenced(resp.Responses[1]); err != nil {
			return nil, nil, err // a migration's fence (fence.go)
		}
		held, err := s.heldBy(op, resp.Responses[0].GetResponseRange().GetKvs(), resp.Header.Revision)
		if held != nil || err != nil {
			return nil, held, err
		}
		// The compare failed, so the read (in the same transaction) holds a conflicting
		// key; should it not, nothing holds the object any more: try again.
	}
}

// grantUntil grants the lease of an "until" key: 0 when the operation has no deadline.
func (s *etcdStore) grantUntil(ctx context.Context, deadline time.Time) (clientv3.LeaseID, error) {
	if deadline.IsZero() {
		return 0, nil
	}
	ttl := time.Until(deadline) + untilSlack
	var resp *clientv3.LeaseGrantResponse
	if err := s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
		return err
	}); err != nil {
		return 0, err
	}
	return resp.ID, nil
}

// revokeLater revokes a lease that no longer holds anything (an "until" lease, a replica's
// lease granted twice at once), without making the call wait; it expires by itself if the
// revoke fails.
func (s *etcdStore) revokeLater(id clientv3.LeaseID) {
	if id == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(s.life, s.timeout)
		defer cancel()
		s.client.Revoke(ctx, id)
	}()
}

// unlock deletes an operation's keys; keys it cannot delete (etcd unreachable) are deleted
// at the replica's next lock or hold ("holder" goes with the lease at the latest, "until" at
// the deadline). The operation's call (ctx: its deadline) waits for it until the margin
// before its deadline at the latest (awaitWithin).
func (s *etcdStore) unlock(ctx context.Context, name string, until clientv3.LeaseID) {
	awaitWithin(ctx, func() { s.deleteOperation(name, until) })
}

// deleteOperation deletes the keys of the operation called name (keys it cannot delete are
// deleted at the replica's next lock or hold), then revokes its "until" lease.
func (s *etcdStore) deleteOperation(name string, until clientv3.LeaseID) {
	keys := []string{name + "holder", name + "until"}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if _, err := s.client.Txn(ctx).Then(clientv3.OpDelete(keys[0]), clientv3.OpDelete(keys[1])).Commit(); err != nil {
		s.mu.Lock()
		s.stale = append(s.stale, keys...)
		s.mu.Unlock()
	}
	s.revokeLater(until)
}

// heldBy describes the operations in flight (kvs, read at rev) that conflict with op, or
// returns nil when none does.
func (s *etcdStore) heldBy(op Operation, kvs []*mvccpb.KeyValue, rev int64) (*Held, error) {
	base := s.opsKey(op.Object)
	var flights []inFlight
	index := map[string]int{} // an operation's keys' name → its place in flights
	for _, kv := range kvs {
		rest := strings.TrimPrefix(string(kv.Key), base)
		if op.Scope != "" && !strings.HasPrefix(rest, "all/") && !strings.HasPrefix(rest, slotKey(op)) {
			continue // another attachment's operation
		}
		i := strings.LastIndexByte(rest, '/')
		name, role := rest[:i], rest[i+1:]
		n, ok := index[name]
		if !ok {
			var v lockValue
			if err := json.Unmarshal(kv.Value, &v); err != nil {
				return nil, fmt.Errorf("operation key %q: %w", kv.Key, err)
			}
			n, index[name] = len(flights), len(flights)
			flights = append(flights, inFlight{lockValue: v})
		}
		flights[n].alive = flights[n].alive || role == "holder"
	}
	// The "until" key of a dead holder outlives its call by its slack and etcd's rounding
	// of TTLs up to whole seconds.
	return heldBy(op, flights, untilSlack+time.Second, func(ctx context.Context) error { return s.watchChange(ctx, base, rev) }), nil
}

// watchChange returns at the first change under prefix after rev, or when ctx ends. A watch
// says nothing while etcd has no quorum (a member notices it has no leader only after
// several election timeouts, and only then ends a watch that requires one), so every
// request timeout it also makes a quorum read: when that fails, so does the wait, naming
// etcd, instead of lasting until the caller's deadline.
func (s *etcdStore) watchChange(ctx context.Context, prefix string, rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	changes := s.client.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	check := time.NewTicker(s.timeout)
	defer check.Stop()
	for {
		select {
		case resp, ok := <-changes:
			if !ok {
				return ctx.Err()
			}
			if err := resp.Err(); err != nil {
				return s.fail(err)
			}
			if len(resp.Events) > 0 {
				return nil
			}
		case <-check.C:
			if err := s.ready(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return err
			}
		}
	}
}
