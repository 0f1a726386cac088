package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// TestLedgerHoldsCommand drives the real binary against a real etcd holding a create's hold
// (as a replica that died mid-create leaves it) and an expansion's: holds lists the create's,
// as a table and as JSON, release-hold deletes it and refuses it the second time, and an
// unknown output is a usage error.
func TestLedgerHoldsCommand(t *testing.T) {
	cluster := testutil.StartEtcd(t, 1)
	tc, err := tlsconf.NewClient(tlsconf.ClientFiles{CA: cluster.CA, Cert: cluster.Cert, Key: cluster.Key, ServerName: cluster.ServerName})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	client, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), TLS: tc.Config(), DialTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	taken := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	for k, v := range map[string]string{
		"/holds-command/tenants/blue/usage":                 `{"v":3,"b":3072}`,
		"/holds-command/tenants/blue/creates/blue.pvc-7":    fmt.Sprintf(`{"v":1,"b":1073741824,"t":%q}`, taken),
		"/holds-command/tenants/green/holds/7f00-1":         `{"b":5}`,
		"/holds-command/tenants/green/creates/green.pvc%2F": `{"v":1}`,
	} {
		if _, err := client.Put(t.Context(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	store := "config:" + writeFile(t, "etcd.yaml", fmt.Sprintf("tenancy: {store: {etcd: {endpoints: [%s], tls: {ca: %s, cert: %s, key: %s, serverName: %s}, prefix: /holds-command/, requestTimeout: 20s}}}\n",
		strings.Join(cluster.Endpoints(), ", "), cluster.CA, cluster.Cert, cluster.Key, cluster.ServerName))

	out, err := runLedger(t, "holds", "--store", store)
	if err != nil || !strings.Contains(out, "TENANT") || !strings.Contains(out, "blue.pvc-7") || !strings.Contains(out, "1073741824") ||
		!strings.Contains(out, "1h0m") || !strings.Contains(out, "green.pvc/") || !strings.Contains(out, "unknown") {
		t.Errorf("holds: %v\n%s\nwant blue.pvc-7's hold of 1 GiB taken 1h ago, and green's of unknown age", err, out)
	}
	out, err = runLedger(t, "holds", "--store", store, "-o", "json")
	var holds []struct {
		tenancy.CreateHold
		AgeSeconds *int64 `json:"ageSeconds"`
	}
	if err != nil || json.Unmarshal([]byte(out), &holds) != nil || len(holds) != 2 {
		t.Fatalf("holds -o json: %v\n%s", err, out)
	}
	if h := holds[0]; h.Tenant != "blue" || h.Name != "blue.pvc-7" || h.Bytes != 1<<30 || h.AgeSeconds == nil || *h.AgeSeconds < 3600 {
		t.Errorf("holds -o json: %+v; want blue.pvc-7 of 1 GiB, at least 3600 s old", h)
	}
	if h := holds[1]; h.Tenant != "green" || h.Name != "green.pvc/" || h.AgeSeconds != nil {
		t.Errorf("holds -o json: %+v; want green.pvc/ of unknown age", h)
	}

	if out, err := runLedger(t, "release-hold", "--store", store, "--tenant", "blue", "--name", "blue.pvc-7"); err != nil || !strings.Contains(out, "released the hold of tenant blue's create of blue.pvc-7 (1073741824 bytes)") {
		t.Errorf("release-hold: %v\n%s", err, out)
	}
	if out, err := runLedger(t, "release-hold", "--store", store, "--tenant", "blue", "--name", "blue.pvc-7"); err == nil || !strings.Contains(out, `no such create hold of the name "blue.pvc-7"`) {
		t.Errorf("release-hold of a released hold: %v\n%s\nwant refused", err, out)
	}
	if resp, err := client.Get(t.Context(), "/holds-command/tenants/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 3 {
		t.Errorf("keys under tenants/ after the release: %v, %v; want the other 3 untouched", resp, err)
	}
	if out, err := runLedger(t, "holds", "--store", store, "-o", "yaml"); err == nil || !strings.Contains(out, "want table or json") {
		t.Errorf("holds -o yaml: %v\n%s\nwant a usage error", err, out)
	}
}

// TestLedgerHoldsBboltInUse: a bbolt file a gateway has open is refused, saying to stop it.
func TestLedgerHoldsBboltInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenancy.db")
	l, err := tenancy.Open(path, nil) // the running gateway
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"holds"}, {"release-hold", "--tenant", "blue", "--name", "blue.pvc-1"}} {
		out, err := runLedger(t, append(args, "--store", "bbolt:"+path)...)
		if err == nil || !strings.Contains(out, "in use by another process") || !strings.Contains(out, "stop the central gateway first") {
			t.Errorf("%s while a gateway has the file: %v\n%s\nwant refused, saying to stop the gateway", args[0], err, out)
		}
	}
	l.Close()
	if out, err := runLedger(t, "holds", "--store", "bbolt:"+path, "-o", "json"); err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("holds of a ledger with none: %v\n%s", err, out)
	}
}
