package tenancy

import (
	"context"
	"errors"
)

// Store is where a Ledger keeps its state: which tenant owns which backend object (Records,
// and the backend names they were created under), every tenant's recorded usage, and the
// quota holds of the calls in flight. BoltStore keeps it in a file one process opens;
// EtcdStore in etcd, shared by any number of replicas. Every method that reaches the store
// is bounded by its ctx (and, for etcd, by the request timeout).
//
// The methods are the ledger's own steps rather than a key-value interface, so that each
// store makes each step atomic its own way (a bbolt transaction under a mutex; an etcd
// transaction comparing mod revisions).
type Store interface {
	// lookup returns the record of a backend object; ok is false when no tenant owns it.
	lookup(ctx context.Context, kind Kind, backendID string) (r Record, ok bool, err error)
	// byName returns the backend ID recorded under a backend name.
	byName(ctx context.Context, kind Kind, name string) (backendID string, ok bool, err error)
	// record gives a backend object to r.Tenant or updates its record, keeping the tenant's
	// volumes and bytes in step; h, if not nil, is the hold the call took for it, which
	// becomes recorded usage in the same step. A record of another tenant's object is
	// errOwnedElsewhere. An empty r.Name keeps the recorded one (and its Asked). The ledger
	// keeps one object per name, as CSI's backends do: a record of another object of the
	// tenant under r.Name (stale: one the backend no longer has, since it answered a create
	// of the name with this one) is forgotten in the same step (replaced).
	record(ctx context.Context, kind Kind, backendID string, r Record, h *hold) error
	// forget removes a backend object's record (nothing happens if there is none), and its
	// name's entry if that still names it.
	forget(ctx context.Context, kind Kind, backendID string) error
	// hold reserves want in tenant's usage if admit, shown the tenant's usage (recorded and
	// held) at that moment, returns nil; otherwise it returns admit's error. No two holds
	// are admitted against the same usage. admit may read records (byName, lookup), after
	// the usage it is shown: a volume forgotten in between changes that usage, and the
	// hold's step starts again (etcd: forgetting a volume writes the tenant's usage key;
	// bbolt: nothing is forgotten while admit runs). create is the backend name of the volume
	// a create holds room for ("" for an expansion): both stores keep such a hold until a
	// create of that name is recorded or fails, even past the death of the process or replica
	// that took it (store_etcd.go, store_bbolt_holds.go); a create of a name that has one
	// takes it over.
	hold(ctx context.Context, tenant string, want usage, create string, admit func(used usage) error) (*hold, error)
	// createHeld returns what the hold an earlier create of the backend name left (its
	// outcome unknown) holds of tenant's usage, which a create of the name takes over (hold):
	// both stores keep such a hold past its call.
	createHeld(ctx context.Context, tenant, name string) (usage, error)
	// release gives a hold back. It is not bounded by a call (it runs when the call is
	// over); a store that cannot release it at once does so later.
	release(h *hold)
	// createHolds returns every create's hold (holds.go).
	createHolds(ctx context.Context) ([]CreateHold, error)
	// dropCreateHold deletes a create's hold, whichever create took it; ok is false when the
	// tenant has no hold of the name.
	dropCreateHold(ctx context.Context, tenant, name string) (h CreateHold, ok bool, err error)
	// usage returns a tenant's usage, recorded and held.
	usage(ctx context.Context, tenant string) (usage, error)
	// usages returns every tenant's usage that the store knows of.
	usages(ctx context.Context) (map[string]usage, error)
	// each calls fn with every record, in no set order, until fn returns an error, which
	// each returns (export.go). It reads one point in time (a bbolt read transaction; one
	// etcd revision), whatever changes meanwhile.
	each(ctx context.Context, fn func(kind Kind, backendID string, r Record) error) error
	// ready returns nil when the store can be read now: always for bbolt; for etcd, when a
	// quorum read answers (an error naming etcd otherwise). /readyz reports it.
	ready(ctx context.Context) error
	// owned returns the backend IDs of tenant's objects of kind, in byte order, from the
	// first after the given one ("": from the start), at most limit of them (0: all),
	// reading no other tenant's records (store_owned.go).
	owned(ctx context.Context, tenant string, kind Kind, after string, limit int) ([]string, error)
	// opLocker locks objects for the operations in flight (oplock.go).
	opLocker
	// Close releases the store (an etcd store's holds vanish with its lease).
	Close() error
}

// usage is a count of volumes and their bytes: a tenant's, or what a hold reserves.
type usage struct{ volumes, bytes int64 }

func (u usage) plus(v usage) usage  { return usage{u.volumes + v.volumes, u.bytes + v.bytes} }
func (u usage) minus(v usage) usage { return usage{u.volumes - v.volumes, u.bytes - v.bytes} }

// hold is room in a tenant's quota a store keeps for one call in flight.
type hold struct {
	tenant string
	key    string // the store's name for it (etcd: its key; bbolt: a create's key in the file, "" for an expansion)
	usage
	rev     int64 // the version that put it (etcd: its revision; bbolt: a create's sequence number)
	adopted bool  // it took over the hold of an earlier create of the same name
}

// change is what recording r over old (nil: a new object) changes in the tenant's usage:
// volumes only are counted.
func change(kind Kind, old *Record, r Record) usage {
	switch {
	case kind != Volume:
		return usage{}
	case old == nil:
		return usage{1, r.Bytes}
	default:
		return usage{0, r.Bytes - old.Bytes}
	}
}

// merge checks r against the object's recorded owner (old, nil if none) and fills in the
// name it was recorded under.
func merge(old *Record, r Record) (Record, error) {
	if old == nil {
		return r, nil
	}
	if old.Tenant != r.Tenant {
		return r, errOwnedElsewhere
	}
	if r.Name == "" {
		r.Name, r.Asked = old.Name, old.Asked
	}
	return r, nil
}

// replaced returns the record a record of r under its name replaces (see Store.record):
// stale, the record of staleID, which the name's entry names, when it is another object's,
// of the same tenant, recorded under the same name; nil otherwise. A group snapshot's is not
// replaced: it stays for the retry of its delete, which forgets the snapshots it had (the
// ledger does not know them otherwise).
func replaced(kind Kind, backendID string, r Record, staleID string, stale *Record) *Record {
	if kind == GroupSnapshot || r.Name == "" || staleID == "" || staleID == backendID || stale == nil || stale.Tenant != r.Tenant || stale.Name != r.Name {
		return nil
	}
	return stale
}

// errOwnedElsewhere is record's refusal to give one tenant an object another tenant owns.
var errOwnedElsewhere = errors.New("owned by another tenant")
