package tenancy

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// reservation is room in a tenant's quota held for a create or an expansion in flight, so
// that concurrent calls — of this process or of other replicas on the same store — cannot
// together exceed it. When the call succeeds, Record turns it into the recorded usage in one
// step (recordReserved); otherwise it is released. A reservation belongs to one call, which
// uses it from one goroutine.
type reservation struct {
	l       *Ledger
	ctx     context.Context // the call's: its release waits for the store until its deadline's margin
	hold    *hold
	settled bool // recorded or released
}

// reserve holds volumes and bytes of a tenant's quota, for a create of the backend name create
// ("" for an expansion). A volume the ledger records under that name leaves its room to the
// create (recordedUnder): the create either answers that volume or, the backend having lost
// it, makes the one whose record replaces it. It fails with RESOURCE_EXHAUSTED,
// saying which limit and how much is used, when the quota has no room, and with UNAVAILABLE
// when the store cannot be reached.
func (l *Ledger) reserve(ctx context.Context, tenant string, volumes, bytes int64, create string) (*reservation, error) {
	q := l.quotas[tenant]
	var refused error // the quota's answer, as opposed to the store's failure
	h, err := l.store.hold(ctx, tenant, usage{volumes, bytes}, create, func(u usage) error {
		refused = nil
		if create != "" {
			// Read after u (Store.hold): never left out of u and deducted as well.
			recorded, err := l.recordedUnder(ctx, tenant, create)
			if err != nil {
				return err
			}
			if volumes <= recorded.volumes && bytes <= recorded.bytes {
				return nil // no more than the recorded volume's room: a retry is never refused
			}
			u = u.minus(recorded)
		}
		if q.MaxVolumes > 0 && volumes > 0 && u.volumes+volumes > q.MaxVolumes {
			refused = status.Errorf(codes.ResourceExhausted,
				"csi-gateway: tenant %s has %d volumes (including creates in flight) and may hold %d (its maxVolumes quota): delete a volume first", tenant, u.volumes, q.MaxVolumes)
		}
		if maxBytes := int64(q.MaxBytes); refused == nil && maxBytes > 0 && bytes > 0 && u.bytes+bytes > maxBytes {
			refused = status.Errorf(codes.ResourceExhausted,
				"csi-gateway: tenant %s uses %d bytes (including creates and expansions in flight); %d more would exceed its maxBytes quota of %d", tenant, u.bytes, bytes, q.MaxBytes)
		}
		return refused
	})
	switch {
	case err != nil && err == refused:
		return nil, err
	case err != nil:
		return nil, ledgerError(err)
	}
	return &reservation{l: l, ctx: ctx, hold: h}, nil
}

// release gives the reservation back; it is a no-op once recorded or released, and on nil.
// Its call waits for it until the margin before its deadline at the latest (awaitWithin): a
// release etcd does not answer goes on without the call (a create's hold, which a retry of
// the name takes over, may then stay until one does).
func (r *reservation) release() {
	if r == nil || r.settled {
		return
	}
	r.settled = true
	awaitWithin(r.ctx, func() { r.l.store.release(r.hold) })
}

// keep settles the reservation of a create whose outcome is unknown (the backend may have
// created the volume: its call failed without a definitive answer, or its record could
// not be written) without giving the room back: a create's hold (in etcd, or in the bbolt
// file) stays until a retry of the name takes it over and records the volume, so that the
// volume, if it exists, is counted meanwhile. A hold no retry can take over (an expansion's
// in bbolt's memory) is released.
func (r *reservation) keep() {
	if r == nil || r.settled || r.hold.rev == 0 {
		r.release()
		return
	}
	r.settled = true
}

// recordedUnder is the usage of the tenant's volume the ledger records under a backend
// name: the room a create of that name may take in its place.
func (l *Ledger) recordedUnder(ctx context.Context, tenant, name string) (usage, error) {
	id, ok, err := l.store.byName(ctx, Volume, name)
	if err != nil || !ok {
		return usage{}, err
	}
	r, ok, err := l.store.lookup(ctx, Volume, id)
	if err != nil || !ok || r.Tenant != tenant || r.Name != name {
		return usage{}, err
	}
	return change(Volume, nil, r), nil
}

// bytesLeft returns how many bytes the tenant's quota has left (creates and expansions in
// flight included), and false when it has no byte quota.
func (l *Ledger) bytesLeft(ctx context.Context, tenant string) (left int64, limited bool, err error) {
	q := l.quotas[tenant]
	if q.MaxBytes <= 0 {
		return 0, false, nil
	}
	u, err := l.store.usage(ctx, tenant)
	if err != nil {
		return 0, true, ledgerError(err)
	}
	return max(0, int64(q.MaxBytes)-u.bytes), true, nil
}

// Usage is what a tenant holds and may hold, for metrics.
type Usage struct {
	Volumes, Bytes int64 // recorded, and held by calls in flight
	Quota          Quota
}

// Usage returns every configured or known tenant's usage.
func (l *Ledger) Usage(ctx context.Context) (map[string]Usage, error) {
	used, err := l.store.usages(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Usage, len(l.quotas))
	for t, q := range l.quotas {
		out[t] = Usage{Quota: q}
	}
	for t, u := range used {
		out[t] = Usage{Volumes: u.volumes, Bytes: u.bytes, Quota: l.quotas[t]}
	}
	return out, nil
}
