package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fence stops every gateway that uses store from writing to it, for `csi-gateway ledger
// migrate`: an export of a store no one writes to is the whole ledger, with no write to miss.
// In etcd it puts the key PREFIX fence, which every write transaction of every replica
// compares absent (recording, forgetting, quota holds, operation locks: each tenant's call
// that would change anything is refused, UNAVAILABLE naming the fence, before its backend
// call, or, past it, with its outcome unknown as after an etcd outage); reads go on. note
// says who fenced it and why, for those errors. fenced is false for a bbolt store, which
// needs no fence: its file is refused to a second process, so no gateway has it open while
// the command does. added is false when the store was fenced already.
func Fence(ctx context.Context, store Store, note string) (fenced, added bool, err error) {
	s, ok := store.(*etcdStore)
	if !ok {
		return false, false, nil
	}
	v, _ := json.Marshal(fenceJSON{Note: note, Since: time.Now().UTC()}) // cannot fail
	var resp *clientv3.TxnResponse
	err = s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Txn(ctx).If(s.notFenced()).Then(clientv3.OpPut(s.fenceKey(), string(v))).Commit()
		return err
	})
	if err != nil {
		return false, false, err
	}
	return true, resp.Succeeded, nil
}

// Unfence lets the gateways write to store again; removed is false when it was not fenced.
func Unfence(ctx context.Context, store Store) (removed bool, err error) {
	s, ok := store.(*etcdStore)
	if !ok {
		return false, nil
	}
	var resp *clientv3.DeleteResponse
	err = s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Delete(ctx, s.fenceKey())
		return err
	})
	return err == nil && resp.Deleted > 0, err
}

// fenceJSON is the fence key's value.
type fenceJSON struct {
	Note  string    `json:"note"`
	Since time.Time `json:"since"`
}

func (s *etcdStore) fenceKey() string { return s.prefix + "fence" }

// notFenced is the compare of every write transaction: the fence key does not exist.
func (s *etcdStore) notFenced() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(s.fenceKey()), "=", 0)
}

// readFence is the read a write transaction makes when its compares fail (its Else), so that
// fenced tells the fence from a write of another replica's.
func (s *etcdStore) readFence() clientv3.Op { return clientv3.OpGet(s.fenceKey()) }

// fenced returns the fence's error when r, a failed write transaction's readFence, found it.
func (s *etcdStore) fenced(r *etcdserverpb.ResponseOp) error {
	kvs := r.GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil
	}
	var f fenceJSON
	json.Unmarshal(kvs[0].Value, &f) // a fence that cannot be read is a fence still
	return fmt.Errorf("etcd at %s: the ledger under %s is fenced (%s, since %s): writes are refused until the gateway is pointed at the ledger's new store, or `csi-gateway ledger unfence` lifts the fence",
		s.where, s.prefix, f.Note, f.Since.Format(time.RFC3339))
}
