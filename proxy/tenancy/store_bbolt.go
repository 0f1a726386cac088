package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// boltStore is the Store of a single central gateway: a bbolt file, each change committed
// (and synced) before the call that made it is answered. Usage is counted from the records
// and the creates' holds (kept in the file: store_bbolt_holds.go) when the file is opened,
// and kept in memory with the expansions' holds, which die with the process (as do the calls
// that took them). One process at a time may open the file.
type boltStore struct {
	db *bolt.DB

	mu   sync.Mutex
	used map[string]usage // recorded and held (creates' holds in the file, expansions' here), per tenant

	locks boltLocks // the operations in flight (oplock_bbolt.go)
}

var (
	objectsBucket = []byte("objects") // kind + backend ID → Record (JSON)
	namesBucket   = []byte("names")   // kind + backend name → backend ID
)

// ErrLedgerInUse is OpenBolt's refusal of a file another process (a running gateway) has open.
var ErrLedgerInUse = errors.New("in use by another process (one gateway per ledger)")

// OpenBolt opens (creating it if needed) the ledger file at path.
func OpenBolt(path string) (Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%s: %w", path, ErrLedgerInUse)
		}
		return nil, err
	}
	s := &boltStore{db: db, used: map[string]usage{}, locks: boltLocks{live: map[string]chan struct{}{}}}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := openOperations(tx); err != nil {
			return err
		}
		for _, b := range [][]byte{objectsBucket, namesBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if err := openOwned(tx); err != nil {
			return err
		}
		if err := openCreateHolds(tx, s.used); err != nil {
			return err
		}
		return tx.Bucket(objectsBucket).ForEach(func(k, v []byte) error {
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			s.used[r.Tenant] = s.used[r.Tenant].plus(change(Kind(k[0]), nil, r))
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func (s *boltStore) Close() error { return s.db.Close() }

// ready: a file the process holds open is always there.
func (s *boltStore) ready(context.Context) error { return nil }

func boltKey(kind Kind, s string) []byte { return append([]byte{byte(kind)}, s...) }

func (s *boltStore) lookup(_ context.Context, kind Kind, backendID string) (r Record, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(objectsBucket).Get(boltKey(kind, backendID))
		if v == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &r)
	})
	return r, ok, err
}

func (s *boltStore) byName(_ context.Context, kind Kind, name string) (backendID string, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(namesBucket).Get(boltKey(kind, name)); v != nil {
			backendID, ok = string(v), true
		}
		return nil
	})
	return backendID, ok, err
}

func (s *boltStore) record(_ context.Context, kind Kind, backendID string, r Record, h *hold) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var delta, held usage
	err := s.db.Update(func(tx *bolt.Tx) error {
		if h != nil && h.key != "" {
			var err error
			if held, err = takeCreateHold(tx, h.key); err != nil {
				return err
			}
		} else if h != nil {
			held = h.usage
		}
		objects := tx.Bucket(objectsBucket)
		old, err := boltRecord(objects, kind, backendID)
		if err != nil {
			return err
		}
		if r, err = merge(old, r); err != nil {
			return err
		}
		delta = change(kind, old, r)
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := objects.Put(boltKey(kind, backendID), v); err != nil {
			return err
		}
		if err := indexOwned(tx, kind, backendID, r); err != nil {
			return err
		}
		if r.Name == "" {
			return nil
		}
		names := tx.Bucket(namesBucket)
		if stale, err := boltReplacing(tx, kind, backendID, r); err != nil {
			return err
		} else if stale != nil {
			delta = delta.minus(change(kind, nil, *stale))
		}
		return names.Put(boltKey(kind, r.Name), []byte(backendID))
	})
	if err != nil {
		return err
	}
	s.used[r.Tenant] = s.used[r.Tenant].plus(delta).minus(held)
	return nil
}

// boltRecord reads an object's record, nil if there is none.
func boltRecord(objects *bolt.Bucket, kind Kind, backendID string) (*Record, error) {
	v := objects.Get(boltKey(kind, backendID))
	if v == nil {
		return nil, nil
	}
	r := new(Record)
	return r, json.Unmarshal(v, r)
}

// boltReplacing forgets the record a record of r under its name replaces (see
// Store.record), if any, and returns it (its name's entry is rewritten by the caller).
func boltReplacing(tx *bolt.Tx, kind Kind, backendID string, r Record) (*Record, error) {
	staleID := string(tx.Bucket(namesBucket).Get(boltKey(kind, r.Name)))
	objects := tx.Bucket(objectsBucket)
	stale, err := boltRecord(objects, kind, staleID)
	if err != nil || replaced(kind, backendID, r, staleID, stale) == nil {
		return nil, err
	}
	if err := unindexOwned(tx, kind, staleID, *stale); err != nil {
		return nil, err
	}
	return stale, objects.Delete(boltKey(kind, staleID))
}

func (s *boltStore) forget(_ context.Context, kind Kind, backendID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old *Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		objects := tx.Bucket(objectsBucket)
		var err error
		if old, err = boltRecord(objects, kind, backendID); err != nil || old == nil {
			return err
		}
		// Its name's entry only if that still names it (see etcdStore.forget).
		if names := tx.Bucket(namesBucket); old.Name != "" && string(names.Get(boltKey(kind, old.Name))) == backendID {
			if err := names.Delete(boltKey(kind, old.Name)); err != nil {
				return err
			}
		}
		if err := unindexOwned(tx, kind, backendID, *old); err != nil {
			return err
		}
		return objects.Delete(boltKey(kind, backendID))
	})
	if err != nil || old == nil {
		return err
	}
	s.used[old.Tenant] = s.used[old.Tenant].minus(change(kind, nil, *old))
	return nil
}

func (s *boltStore) hold(_ context.Context, tenant string, want usage, create string, admit func(usage) error) (*hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if create != "" {
		return s.holdCreate(tenant, want, create, admit)
	}
	if err := admit(s.used[tenant]); err != nil {
		return nil, err
	}
	s.used[tenant] = s.used[tenant].plus(want)
	return &hold{tenant: tenant, usage: want}, nil
}

// release gives an expansion's hold back, and deletes a create's from the file unless it took
// over an earlier create's (whose outcome is still unknown) or another create took it over
// since; a delete that fails leaves the hold to the name's next create, as with etcd.
func (s *boltStore) release(h *hold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case h.key == "":
		s.used[h.tenant] = s.used[h.tenant].minus(h.usage)
	case !h.adopted:
		s.dropBoltCreateHold(h.tenant, []byte(h.key), uint64(h.rev))
	}
}

func (s *boltStore) usage(_ context.Context, tenant string) (usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used[tenant], nil
}

func (s *boltStore) usages(context.Context) (map[string]usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]usage, len(s.used))
	for t, u := range s.used {
		out[t] = u
	}
	return out, nil
}

func (s *boltStore) each(_ context.Context, fn func(Kind, string, Record) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(objectsBucket).ForEach(func(k, v []byte) error {
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			return fn(Kind(k[0]), string(k[1:]), r)
		})
	})
}
