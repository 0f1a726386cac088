package tenancy

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Ledger records which tenant owns which backend object, durably: a bbolt file, each change
// committed (and synced) before the call that made it is answered. It also keeps every
// tenant's usage (volume count and bytes) for quotas. It is safe for concurrent use; one
// process at a time may open the file.
//
// The ledger follows the backend: an object is recorded after the backend created it and
// forgotten after the backend deleted it. A crash in between is healed by the retry the
// orchestrator makes (a create of the same name returns the same object and records it; a
// delete of a deleted object is OK and forgets it).
type Ledger struct {
	db     *bolt.DB
	quotas map[string]Quota
	tokens *tokens // seals the listings' next_tokens

	mu    sync.Mutex
	usage map[string]*usage
}

// Quota bounds what a tenant may hold; zero fields are unlimited.
type Quota struct {
	MaxVolumes int64 `mapstructure:"maxVolumes"`
	MaxBytes   int64 `mapstructure:"maxBytes"`
}

// Record is what the ledger knows of one object.
type Record struct {
	Tenant string `json:"t"`
	Name   string `json:"n,omitempty"` // the backend's (scoped) name, when the object was created by name
	Bytes  int64  `json:"b,omitempty"` // volumes: their capacity
}

// usage is a tenant's volumes and bytes, recorded and reserved by creates in flight.
type usage struct{ volumes, bytes int64 }

var (
	objectsBucket = []byte("objects") // kind + backend ID → Record (JSON)
	namesBucket   = []byte("names")   // kind + backend name → backend ID
)

// errOwnedElsewhere is Record's refusal to give one tenant an object another tenant owns.
var errOwnedElsewhere = errors.New("owned by another tenant")

// Option configures a Ledger at Open.
type Option func(*options)

type options struct {
	tokenKey []byte
}

// WithTokenKey seals the pagination tokens tenants are given with key (TokenKeySize random
// bytes; see tokens). Ledgers with the same key — replicas, or one gateway across restarts —
// accept each other's tokens. Without it, each Open draws a random key: a token is then
// refused (ABORTED) by any other replica and after a restart, and the caller restarts its
// listing.
func WithTokenKey(key []byte) Option {
	return func(o *options) { o.tokenKey = key }
}

// Open opens (creating it if needed) the ledger at path, with the tenants' quotas. A token
// key of the wrong size is an error.
func Open(path string, quotas map[string]Quota, opts ...Option) (*Ledger, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tokens, err := newTokens(o.tokenKey)
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("%s is in use by another process (one gateway per ledger)", path)
		}
		return nil, err
	}
	l := &Ledger{db: db, quotas: quotas, tokens: tokens, usage: map[string]*usage{}}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{objectsBucket, namesBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return tx.Bucket(objectsBucket).ForEach(func(k, v []byte) error {
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			if Kind(k[0]) == Volume {
				u := l.usageOf(r.Tenant)
				u.volumes++
				u.bytes += r.Bytes
			}
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Close closes the file.
func (l *Ledger) Close() error { return l.db.Close() }

func key(kind Kind, s string) []byte { return append([]byte{byte(kind)}, s...) }

// Lookup returns the record of a backend object; ok is false when no tenant owns it.
func (l *Ledger) Lookup(kind Kind, backendID string) (r Record, ok bool, err error) {
	err = l.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(objectsBucket).Get(key(kind, backendID))
		if v == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &r)
	})
	return r, ok, err
}

// ByName returns the backend ID of the object recorded under a backend name.
func (l *Ledger) ByName(kind Kind, name string) (backendID string, ok bool, err error) {
	err = l.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(namesBucket).Get(key(kind, name)); v != nil {
			backendID, ok = string(v), true
		}
		return nil
	})
	return backendID, ok, err
}

// Record gives a backend object to r.Tenant, or updates its record (a volume's new size).
// It refuses an object another tenant owns with errOwnedElsewhere.
func (l *Ledger) Record(kind Kind, backendID string, r Record) error {
	return l.recordReserved(kind, backendID, r, nil)
}

// recordReserved is Record for the outcome of a call that held res: the reservation becomes
// the recorded usage in the same step, so that the object is never counted twice (or not at
// all) in between. res may be nil.
func (l *Ledger) recordReserved(kind Kind, backendID string, r Record, res *reservation) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var old *Record
	err := l.db.Update(func(tx *bolt.Tx) error {
		objects := tx.Bucket(objectsBucket)
		if v := objects.Get(key(kind, backendID)); v != nil {
			old = new(Record)
			if err := json.Unmarshal(v, old); err != nil {
				return err
			}
			if old.Tenant != r.Tenant {
				return errOwnedElsewhere
			}
			if r.Name == "" {
				r.Name = old.Name
			}
		}
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := objects.Put(key(kind, backendID), v); err != nil {
			return err
		}
		if r.Name == "" {
			return nil
		}
		return tx.Bucket(namesBucket).Put(key(kind, r.Name), []byte(backendID))
	})
	if err != nil || kind != Volume {
		return err
	}
	if res != nil {
		res.releaseLocked()
	}
	u := l.usageOf(r.Tenant)
	if old == nil {
		u.volumes++
		u.bytes += r.Bytes
	} else {
		u.bytes += r.Bytes - old.Bytes
	}
	return nil
}

// Forget removes a backend object from the ledger (nothing happens if it is not there).
func (l *Ledger) Forget(kind Kind, backendID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var old *Record
	err := l.db.Update(func(tx *bolt.Tx) error {
		objects := tx.Bucket(objectsBucket)
		v := objects.Get(key(kind, backendID))
		if v == nil {
			return nil
		}
		old = new(Record)
		if err := json.Unmarshal(v, old); err != nil {
			return err
		}
		if old.Name != "" {
			if err := tx.Bucket(namesBucket).Delete(key(kind, old.Name)); err != nil {
				return err
			}
		}
		return objects.Delete(key(kind, backendID))
	})
	if err != nil || old == nil || kind != Volume {
		return err
	}
	u := l.usageOf(old.Tenant)
	u.volumes--
	u.bytes -= old.Bytes
	return nil
}

// usageOf returns a tenant's usage, creating it; l.mu must be held (or l not yet shared).
func (l *Ledger) usageOf(tenant string) *usage {
	u := l.usage[tenant]
	if u == nil {
		u = &usage{}
		l.usage[tenant] = u
	}
	return u
}
