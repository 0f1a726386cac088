package tenancy

import (
	"bytes"
	"context"
	"strconv"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The per-tenant index of the records: each store keeps, beside a record, a key naming the
// tenant, the kind and the backend ID, written and deleted in the same step as the record,
// so that a tenant's objects of a kind can be read in backend-ID order without reading any
// other tenant's (owned; the tenant's own listing, list_owned.go).

// ownedBucket is bbolt's index: tenant NUL kind backend-ID → nothing. Tenant names hold no
// NUL (ValidTenantName).
var ownedBucket = []byte("owned")

func boltOwnedPrefix(tenant string, kind Kind) []byte {
	return append([]byte(tenant+"\x00"), byte(kind))
}

func boltOwnedKey(tenant string, kind Kind, backendID string) []byte {
	return append(boltOwnedPrefix(tenant, kind), backendID...)
}

// indexOwned puts r's index key in tx; unindexOwned deletes it.
func indexOwned(tx *bolt.Tx, kind Kind, backendID string, r Record) error {
	return tx.Bucket(ownedBucket).Put(boltOwnedKey(r.Tenant, kind, backendID), nil)
}

func unindexOwned(tx *bolt.Tx, kind Kind, backendID string, r Record) error {
	return tx.Bucket(ownedBucket).Delete(boltOwnedKey(r.Tenant, kind, backendID))
}

// openOwned creates the index of a file written before it existed, from the records, in the
// transaction that opens the file; an indexed file is left as it is.
func openOwned(tx *bolt.Tx) error {
	if tx.Bucket(ownedBucket) != nil {
		return nil
	}
	if _, err := tx.CreateBucket(ownedBucket); err != nil {
		return err
	}
	return tx.Bucket(objectsBucket).ForEach(func(k, v []byte) error {
		r, err := boltRecord(tx.Bucket(objectsBucket), Kind(k[0]), string(k[1:]))
		if err != nil {
			return err
		}
		return indexOwned(tx, Kind(k[0]), string(k[1:]), *r)
	})
}

func (s *boltStore) owned(_ context.Context, tenant string, kind Kind, after string, limit int) ([]string, error) {
	var ids []string
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := boltOwnedPrefix(tenant, kind)
		from := prefix
		if after != "" {
			from = append(append(bytes.Clone(prefix), after...), 0) // the first key after prefix+after
		}
		c := tx.Bucket(ownedBucket).Cursor()
		k, _ := c.Seek(from)
		for ; k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || len(ids) < limit); k, _ = c.Next() {
			ids = append(ids, string(k[len(prefix):]))
		}
		return nil
	})
	return ids, err
}

// ownedPrefix is etcd's index: PREFIX owned/TENANT/KIND/BACKEND-ID → "". Not under
// tenants/TENANT/, whose mod revisions admit the quota holds.
func (s *etcdStore) ownedPrefix(tenant string, kind Kind) string {
	return s.prefix + "owned/" + tenant + "/" + strconv.Itoa(int(kind)) + "/"
}

// indexOwned and unindexOwned are the index's operations in a record's transaction.
func (s *etcdStore) indexOwned(kind Kind, backendID string, r Record) clientv3.Op {
	return clientv3.OpPut(s.ownedPrefix(r.Tenant, kind)+backendID, "")
}

func (s *etcdStore) unindexOwned(kind Kind, backendID string, r Record) clientv3.Op {
	return clientv3.OpDelete(s.ownedPrefix(r.Tenant, kind) + backendID)
}

func (s *etcdStore) owned(ctx context.Context, tenant string, kind Kind, after string, limit int) ([]string, error) {
	prefix := s.ownedPrefix(tenant, kind)
	from := prefix
	if after != "" {
		from = prefix + after + "\x00" // the first key after prefix+after
	}
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	var resp *clientv3.GetResponse
	if err := s.request(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Get(ctx, from, opts...)
		return err
	}); err != nil {
		return nil, err
	}
	ids := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		ids[i] = string(kv.Key[len(prefix):])
	}
	return ids, nil
}
