package tenancy

import (
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// reserve holds volumes and bytes of a tenant's quota for a create or expansion in flight,
// so that concurrent calls cannot together exceed it. It fails with RESOURCE_EXHAUSTED,
// saying which limit and how much is used, when the quota has no room. The returned release
// gives the reservation back; call it once the ledger has recorded the outcome.
func (l *Ledger) reserve(tenant string, volumes, bytes int64) (release func(), err error) {
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
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			u.volumes -= volumes
			u.bytes -= bytes
		})
	}, nil
}

// bytesLeft returns how many bytes the tenant's quota has left, and false when it has no
// byte quota.
func (l *Ledger) bytesLeft(tenant string) (int64, bool) {
	q := l.quotas[tenant]
	if q.MaxBytes <= 0 {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, q.MaxBytes-l.usageOf(tenant).bytes), true
}
