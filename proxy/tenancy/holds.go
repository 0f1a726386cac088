package tenancy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// CreateHold is the quota hold of a create whose outcome is not known yet: its call failed
// without a definitive answer, or its process or replica died while the backend may still
// have been creating the volume. It counts the volume the backend may hold until a create of
// the same name records the volume (taking the hold over) or fails definitively. Both stores
// keep it past the process that took it (bbolt in the file, etcd in a key bound to no lease).
type CreateHold struct {
	Tenant string `json:"tenant"`
	// Name is the backend name of the volume (the tenant's prefix included).
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// Taken is when the last create of the name took the hold (zero: a hold written by a
	// gateway that did not note it).
	Taken time.Time `json:"taken,omitzero"`
}

// CreateHolds returns every create's hold in store, by tenant, then name.
func CreateHolds(ctx context.Context, store Store) ([]CreateHold, error) {
	holds, err := store.createHolds(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(holds, func(a, b CreateHold) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Name, b.Name))
	})
	return holds, nil
}

// ErrNoHold is ReleaseCreateHold's answer when the tenant has no hold of a create of the name.
var ErrNoHold = errors.New("no such create hold")

// ReleaseCreateHold deletes the hold of a create of the backend name by tenant and returns
// what it held: the room is the tenant's again. It is for an operator, once the backend is
// known to hold no volume of that name (its create is never to be retried): were the volume
// there, the tenant could go over its quota.
func ReleaseCreateHold(ctx context.Context, store Store, tenant, name string) (CreateHold, error) {
	if err := ValidTenantName(tenant); err != nil {
		return CreateHold{}, err
	}
	h, ok, err := store.dropCreateHold(ctx, tenant, name)
	if err == nil && !ok {
		err = fmt.Errorf("tenant %s: %w of the name %q (`csi-gateway ledger holds` lists them)", tenant, ErrNoHold, name)
	}
	return h, err
}

// holdJSON is a hold (or a tenant's usage) as the stores keep it.
type holdJSON struct {
	Volumes int64 `json:"v,omitempty"`
	Bytes   int64 `json:"b,omitempty"`
	// Taken is when a create's hold was taken or taken over (not set for usage).
	Taken time.Time `json:"t,omitzero"`
}

func encodeHold(u usage, taken time.Time) []byte {
	v, _ := json.Marshal(holdJSON{u.volumes, u.bytes, taken}) // cannot fail
	return v
}

func (h holdJSON) usage() usage { return usage{h.Volumes, h.Bytes} }

func (h holdJSON) createHold(tenant, name string) CreateHold {
	return CreateHold{Tenant: tenant, Name: name, Bytes: h.Bytes, Taken: h.Taken}
}
