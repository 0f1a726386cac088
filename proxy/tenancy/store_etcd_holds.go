package tenancy

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// createHolds reads every tenant's create holds (PREFIX tenants/TENANT/creates/NAME).
func (s *etcdStore) createHolds(ctx context.Context) ([]CreateHold, error) {
	kvs, _, err := s.readPrefix(ctx, s.tenantsPrefix())
	if err != nil {
		return nil, err
	}
	var out []CreateHold
	for _, kv := range kvs {
		tenant, rest, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), s.tenantsPrefix()), "/")
		escaped, ok := strings.CutPrefix(rest, "creates/")
		if !ok {
			continue // the tenant's usage, or an expansion's hold
		}
		name, err := url.PathUnescape(escaped)
		if err != nil {
			return nil, fmt.Errorf("etcd key %q: %w", kv.Key, err)
		}
		h, err := decodeHold(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, h.createHold(tenant, name))
	}
	return out, nil
}

// dropCreateHold deletes a create's hold in one request, whichever create holds it now.
func (s *etcdStore) dropCreateHold(ctx context.Context, tenant, name string) (CreateHold, bool, error) {
	var resp *clientv3.DeleteResponse
	if err := s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Delete(ctx, s.createHoldKey(tenant, name), clientv3.WithPrevKV())
		return err
	}); err != nil {
		return CreateHold{}, false, err
	}
	if len(resp.PrevKvs) == 0 {
		return CreateHold{}, false, nil
	}
	h, err := decodeHold(resp.PrevKvs[0])
	return h.createHold(tenant, name), true, err
}
