package tenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// createHoldsBucket keeps the quota holds of creates whose outcome is not known yet, in the
// file, as etcd keeps them in keys bound to no lease: TENANT "/" BACKEND-NAME → boltHold.
// A process that dies while its creates are in flight at the backend (which may still
// complete them) leaves their holds behind; the restarted process counts them when it opens
// the file, so other names' creates cannot take the room those volumes may fill, and the
// retry of each name takes its hold over. An expansion's hold stays in memory: it dies with
// the process, as etcd's dies with the replica's lease.
var createHoldsBucket = []byte("createHolds")

// boltHold is a create's hold as the file keeps it: the hold, and the number of the create
// that took it (the bucket's sequence), so that a create's release deletes only its own.
type boltHold struct {
	holdJSON
	Seq uint64 `json:"n"`
}

func boltCreateHoldKey(tenant, name string) []byte { return []byte(tenant + "/" + name) }

// openCreateHolds creates the bucket and counts the holds of the process before in used.
func openCreateHolds(tx *bolt.Tx, used map[string]usage) error {
	b, err := tx.CreateBucketIfNotExists(createHoldsBucket)
	if err != nil {
		return err
	}
	return b.ForEach(func(k, v []byte) error {
		h, err := decodeBoltHold(k, v)
		if err != nil {
			return err
		}
		tenant, _, _ := bytes.Cut(k, []byte("/"))
		used[string(tenant)] = used[string(tenant)].plus(h.usage())
		return nil
	})
}

func decodeBoltHold(k, v []byte) (*boltHold, error) {
	h := new(boltHold)
	if err := json.Unmarshal(v, h); err != nil {
		return nil, fmt.Errorf("create hold %q: %w", k, err)
	}
	return h, nil
}

// holdCreate takes (or takes over) the hold of a create of name, in the file; s.mu is held.
func (s *boltStore) holdCreate(tenant string, want usage, name string, admit func(usage) error) (*hold, error) {
	key := boltCreateHoldKey(tenant, name)
	var earlier usage // the hold taken over, if any: its room is this create's
	var h *hold
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(createHoldsBucket)
		var old *boltHold
		if v := b.Get(key); v != nil {
			var err error
			if old, err = decodeBoltHold(key, v); err != nil {
				return err
			}
			earlier = old.usage()
		}
		if err := admit(s.used[tenant].minus(earlier)); err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		v, err := json.Marshal(boltHold{holdJSON{want.volumes, want.bytes, time.Now()}, seq})
		if err != nil {
			return err
		}
		h = &hold{tenant: tenant, key: string(key), usage: want, rev: int64(seq), adopted: old != nil}
		return b.Put(key, v)
	})
	if err != nil {
		return nil, err
	}
	s.used[tenant] = s.used[tenant].minus(earlier).plus(want)
	return h, nil
}

// takeCreateHold deletes a create's hold in tx (which records its volume) and returns what it
// held; nothing if the hold is gone (an operator released it).
func takeCreateHold(tx *bolt.Tx, key string) (usage, error) {
	b := tx.Bucket(createHoldsBucket)
	v := b.Get([]byte(key))
	if v == nil {
		return usage{}, nil
	}
	h, err := decodeBoltHold([]byte(key), v)
	if err != nil {
		return usage{}, err
	}
	return h.usage(), b.Delete([]byte(key))
}

// dropBoltCreateHold deletes a create's hold if seq took it (0: whichever did) and gives its
// room back; s.mu is held.
func (s *boltStore) dropBoltCreateHold(tenant string, key []byte, seq uint64) (*boltHold, error) {
	var dropped *boltHold
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(createHoldsBucket)
		v := b.Get(key)
		if v == nil {
			return nil
		}
		h, err := decodeBoltHold(key, v)
		if err != nil || (seq != 0 && h.Seq != seq) {
			return err
		}
		dropped = h
		return b.Delete(key)
	})
	if err != nil || dropped == nil {
		return nil, err
	}
	s.used[tenant] = s.used[tenant].minus(dropped.usage())
	return dropped, nil
}

// createHeld returns what the hold an earlier create of name left in the file holds.
func (s *boltStore) createHeld(_ context.Context, tenant, name string) (usage, error) {
	var held usage
	err := s.db.View(func(tx *bolt.Tx) error {
		key := boltCreateHoldKey(tenant, name)
		v := tx.Bucket(createHoldsBucket).Get(key)
		if v == nil {
			return nil
		}
		h, err := decodeBoltHold(key, v)
		if h != nil {
			held = h.usage()
		}
		return err
	})
	return held, err
}

func (s *boltStore) createHolds(context.Context) ([]CreateHold, error) {
	var out []CreateHold
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(createHoldsBucket).ForEach(func(k, v []byte) error {
			h, err := decodeBoltHold(k, v)
			if err != nil {
				return err
			}
			tenant, name, _ := bytes.Cut(k, []byte("/"))
			out = append(out, h.createHold(string(tenant), string(name)))
			return nil
		})
	})
	return out, err
}

func (s *boltStore) dropCreateHold(_ context.Context, tenant, name string) (CreateHold, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.dropBoltCreateHold(tenant, boltCreateHoldKey(tenant, name), 0)
	if err != nil || h == nil {
		return CreateHold{}, false, err
	}
	return h.createHold(tenant, name), true, nil
}
