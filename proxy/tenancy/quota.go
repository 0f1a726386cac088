package tenancy

import (
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// reservation is room in a tenant's quota held for a create or an expansion in flight, so
// that concurrent calls cannot together exceed it. When the call succeeds, Record turns it
// into the recorded usage in one step (recordReserved); otherwise it is released.
type reservation struct {
	l              *Ledger
	tenant         string
	volumes, bytes int64
	once           sync.Once
}

// reserve holds volumes and bytes of a tenant's quota. It fails with RESOURCE_EXHAUSTED,
// saying which limit and how much is used, when the quota has no room.
func (l *Ledger) reserve(tenant string, volumes, bytes int64) (*reservation, error) {
	q := l.quotas[tenant]
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.usageOf(tenant)
	if q.MaxVolumes > 0 && volumes > 0 && u.volumes+volumes > q.MaxVolumes {
		return nil, status.Errorf(codes.ResourceExhausted,
			"csi-gateway: tenant %s has %d volumes (including creates in flight) and may hold %d (its maxVolumes quota): delete a volume first", tenant, u.volumes, q.MaxVolumes)
	}
	if q.MaxBytes > 0 && bytes > 0 && u.bytes+bytes > q.MaxBytes {
		return nil, status.Errorf(codes.ResourceExhausted,
			"csi-gateway: tenant %s uses %d bytes (including creates and expansions in flight); %d more would exceed its maxBytes quota of %d", tenant, u.bytes, bytes, q.MaxBytes)
	}
	u.volumes += volumes
	u.bytes += bytes
	return &reservation{l: l, tenant: tenant, volumes: volumes, bytes: bytes}, nil
}

// release gives the reservation back; it is a no-op after the first call, and on nil.
func (r *reservation) release() {
	if r == nil {
		return
	}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.releaseLocked()
}

// releaseLocked is release with r.l.mu held.
func (r *reservation) releaseLocked() {
	r.once.Do(func() {
		u := r.l.usageOf(r.tenant)
		u.volumes -= r.volumes
		u.bytes -= r.bytes
	})
}

// bytesLeft returns how many bytes the tenant's quota has left (creates and expansions in
// flight included), and false when it has no byte quota.
func (l *Ledger) bytesLeft(tenant string) (int64, bool) {
	q := l.quotas[tenant]
	if q.MaxBytes <= 0 {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, q.MaxBytes-l.usageOf(tenant).bytes), true
}

// Usage is what a tenant holds and may hold, for metrics.
type Usage struct {
	Volumes, Bytes int64 // recorded, and held by calls in flight
	Quota          Quota
}

// Usage returns every configured or known tenant's usage.
func (l *Ledger) Usage() map[string]Usage {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Usage, len(l.quotas))
	for t, q := range l.quotas {
		out[t] = Usage{Quota: q}
	}
	for t, u := range l.usage {
		out[t] = Usage{Volumes: u.volumes, Bytes: u.bytes, Quota: l.quotas[t]}
	}
	return out
}
