package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// TestConfigTenancyStore: each way of naming the ledger's store opens one that keeps what is
// recorded in it across a reopening: the tenancy.ledger shorthand and tenancy.store.bbolt.path
// (a file), and tenancy.store.etcd (a real 3-member etcd over mTLS, every key decoded).
func TestConfigTenancyStore(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		yaml func(t *testing.T) string // the tenancy block
		want string                    // what openStore says the store is
	}{
		{"ledger shorthand", func(*testing.T) string {
			return "{ledger: " + filepath.Join(dir, "a.db") + ", tenants: [{name: blue}]}"
		}, "bbolt " + filepath.Join(dir, "a.db")},
		{"bbolt", func(*testing.T) string {
			return "{store: {bbolt: {path: " + filepath.Join(dir, "b.db") + "}}, tenants: [{name: blue}]}"
		}, "bbolt " + filepath.Join(dir, "b.db")},
		{"etcd", func(t *testing.T) string {
			c := testutil.StartEtcd(t, 3)
			return fmt.Sprintf("{store: {etcd: {endpoints: [%s], tls: {ca: %s, cert: %s, key: %s, serverName: %s}, prefix: /config-test/, leaseTTL: 3s, requestTimeout: 20s}}, tenants: [{name: blue}]}",
				strings.Join(c.Endpoints(), ", "), c.CA, c.Cert, c.Key, c.ServerName)
		}, "etcd https://127.0.0.1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadFrom(t, "tenancy: "+tc.yaml(t), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if e := c.Tenancy.Store.Etcd; e != nil && (e.Prefix != "/config-test/" || e.LeaseTTL != 3*time.Second || e.RequestTimeout != 20*time.Second || e.TLS.ServerName != "localhost" || len(e.Endpoints) != 3) {
				t.Errorf("tenancy.store.etcd decoded as %+v", e)
			}
			open := func() *tenancy.Ledger {
				t.Helper()
				store, where, err := c.Tenancy.loadAndOpenStore(slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(where, tc.want) {
					t.Errorf("the store is %q, want %q…", where, tc.want)
				}
				l, err := tenancy.New(store, c.Tenancy.quotas())
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			l := open()
			if err := l.Record(t.Context(), tenancy.Volume, "vol-1", tenancy.Record{Tenant: "blue", Name: "blue.pvc-1"}); err != nil {
				t.Fatal(err)
			}
			l.Close()
			l = open()
			defer l.Close()
			if r, ok, err := l.Lookup(t.Context(), tenancy.Volume, "vol-1"); err != nil || !ok || r.Tenant != "blue" {
				t.Errorf("after reopening: %+v, %t, %v", r, ok, err)
			}
		})
	}
}
