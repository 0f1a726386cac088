package tenancy

import (
	"context"
	"strings"

	"github.com/csi-gateway/csi-gateway/internal/bytesize"
)

// Ledger records which tenant owns which backend object, and every tenant's usage (volume
// count and bytes) for quotas, in a Store: a bbolt file (OpenBolt, one process) or etcd
// (OpenEtcd, any number of replicas). Each change is stored before the call that made it is
// answered. It is safe for concurrent use.
//
// The ledger follows the backend: an object is recorded after the backend created it and
// forgotten after the backend deleted it. A crash in between is healed by the retry the
// orchestrator makes (a create of the same name returns the same object and records it; a
// delete of a deleted object is OK and forgets it; a create of a name whose object the
// backend deleted before the ledger forgot it makes a new one, whose record replaces the
// stale one: Store.record).
type Ledger struct {
	store  Store
	quotas map[string]Quota
	tokens *tokens // seals the listings' next_tokens
}

// Quota bounds what a tenant may hold; zero fields are unlimited. MaxBytes is bytes, or in
// the configuration file a string with a unit ("500Gi", "1Ti": bytesize.Parse).
type Quota struct {
	MaxVolumes int64         `mapstructure:"maxVolumes"`
	MaxBytes   bytesize.Size `mapstructure:"maxBytes"`
}

// Record is what the ledger knows of one object.
type Record struct {
	Tenant string `json:"t"`
	Name   string `json:"n,omitempty"` // the backend's (scoped) name, when the object was created by name
	// Asked is the name as the tenant sent it, when Name does not show it beyond doubt: a
	// name too long to take the tenant's prefix whole, cut and hashed (ScopeName), or one
	// that looks so. Records written before it existed have none.
	Asked string `json:"a,omitempty"`
	Bytes int64  `json:"b,omitempty"` // volumes: their capacity
}

// asked is the Asked of the record of an object a tenant created under name (scoped: its
// backend name): "" when scoped shows it beyond doubt, name otherwise (cut and hashed, or
// looking so).
func asked(tenant, name, scoped string) string {
	if scoped == prefix(tenant)+name && !cutAndHashed(scoped) {
		return ""
	}
	return name
}

// Option configures a Ledger at New.
type Option func(*options)

type options struct {
	tokenKey []byte
}

// WithTokenKey seals the pagination tokens tenants are given with key (TokenKeySize random
// bytes; see tokens). Ledgers with the same key — replicas, or one gateway across restarts —
// accept each other's tokens. Without it, each New draws a random key: a token is then
// refused (ABORTED) by any other replica and after a restart, and the caller restarts its
// listing.
func WithTokenKey(key []byte) Option {
	return func(o *options) { o.tokenKey = key }
}

// New returns a ledger keeping its state in store, with the tenants' quotas; the ledger's
// Close closes store. A token key of the wrong size is an error (store is then left open).
func New(store Store, quotas map[string]Quota, opts ...Option) (*Ledger, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tokens, err := newTokens(o.tokenKey)
	if err != nil {
		return nil, err
	}
	return &Ledger{store: store, quotas: quotas, tokens: tokens}, nil
}

// Open opens (creating it if needed) a ledger in the bbolt file at path: OpenBolt and New.
func Open(path string, quotas map[string]Quota, opts ...Option) (*Ledger, error) {
	store, err := OpenBolt(path)
	if err != nil {
		return nil, err
	}
	l, err := New(store, quotas, opts...)
	if err != nil {
		store.Close()
		return nil, err
	}
	return l, nil
}

// Ready returns nil when the ledger's store can be read now (always, for a bbolt file), or an
// error naming the store (etcd without a quorum, or out of reach).
func (l *Ledger) Ready(ctx context.Context) error { return l.store.ready(ctx) }

// Close closes the store.
func (l *Ledger) Close() error { return l.store.Close() }

// Lookup returns the record of a backend object; ok is false when no tenant owns it.
func (l *Ledger) Lookup(ctx context.Context, kind Kind, backendID string) (r Record, ok bool, err error) {
	return l.store.lookup(ctx, kind, backendID)
}

// CreatedAs returns the name tenant created an object under, as the tenant sent it, given the
// ID the tenant knows it by: told from the backend name, or, for a name too long to scope
// whole (kept as a prefix and a hash: ScopeName), the name its record kept (Asked). ok is
// false when the tenant owns no such object, or when its name cannot be told: a long name
// recorded before records kept it. A store error is UNAVAILABLE, naming the store.
func (l *Ledger) CreatedAs(ctx context.Context, tenant string, kind Kind, id string) (name string, ok bool, err error) {
	backendID, ok := UnscopeID(tenant, id)
	if !ok {
		return "", false, nil
	}
	r, ok, err := l.store.lookup(ctx, kind, backendID)
	if err != nil {
		return "", false, ledgerError(err)
	}
	name, scoped := strings.CutPrefix(r.Name, prefix(tenant))
	if !ok || r.Tenant != tenant || !scoped {
		return "", false, nil
	}
	switch {
	case r.Asked != "":
		name = r.Asked
	case cutAndHashed(r.Name):
		return "", false, nil // a long name, recorded before records kept it
	}
	if again, err := ScopeName(tenant, name); err != nil || again != r.Name {
		return "", false, nil
	}
	return name, true, nil
}

// ByName returns the backend ID of the object recorded under a backend name.
func (l *Ledger) ByName(ctx context.Context, kind Kind, name string) (backendID string, ok bool, err error) {
	return l.store.byName(ctx, kind, name)
}

// Record gives a backend object to r.Tenant, or updates its record (a volume's new size).
// It refuses an object another tenant owns with errOwnedElsewhere.
func (l *Ledger) Record(ctx context.Context, kind Kind, backendID string, r Record) error {
	return l.recordReserved(ctx, kind, backendID, r, nil)
}

// recordReserved is Record for the outcome of a call that held res: the reservation becomes
// the recorded usage in the same step, so that the object is never counted twice (or not at
// all) in between. res may be nil.
func (l *Ledger) recordReserved(ctx context.Context, kind Kind, backendID string, r Record, res *reservation) error {
	var h *hold
	if res != nil && !res.settled {
		h = res.hold
	}
	if err := l.store.record(ctx, kind, backendID, r, h); err != nil {
		return err
	}
	if h != nil {
		res.settled = true
	}
	return nil
}

// Forget removes a backend object from the ledger (nothing happens if it is not there).
func (l *Ledger) Forget(ctx context.Context, kind Kind, backendID string) error {
	return l.store.forget(ctx, kind, backendID)
}
