package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestReadyzFollowsEtcd: a central gateway from the real binary with its tenancy ledger in a
// real 3-member etcd is ready while etcd has a quorum, answers /readyz 503 naming etcd once
// two members are stopped (while /healthz stays 200), and 200 again once one is back.
func TestReadyzFollowsEtcd(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	dir := t.TempDir()
	admin := "http://" + testutil.FreeAddr(t)
	gw := startGatewayWith(t, dir, fmt.Sprintf(`admin: {listen: %q}
backends:
  local: {type: embedded, dataDir: %q}
routes:
  - {methods: ["*"], backend: local}
tenancy:
  store:
    etcd:
      endpoints: [%s]
      tls: {ca: %s, cert: %s, key: %s, serverName: %s}
      prefix: /readyz/
      requestTimeout: 2s
  tenants: [{name: blue}]
`, strings.TrimPrefix(admin, "http://"), filepath.Join(dir, "data"), strings.Join(cluster.Endpoints(), ", "), cluster.CA, cluster.Cert, cluster.Key, cluster.ServerName))

	waitHTTP(t, gw.Process, admin+"/readyz", http.StatusOK, "ready", 60*time.Second)
	cluster.Stop(1)
	cluster.Stop(2)
	body := waitHTTP(t, gw.Process, admin+"/readyz", http.StatusServiceUnavailable, "", 60*time.Second)
	if !strings.Contains(body, "the tenancy ledger in etcd https://127.0.0.1:") {
		t.Errorf("/readyz without etcd's quorum: %q, want a reason naming the ledger's etcd", body)
	}
	checkHTTP(t, admin+"/healthz", http.StatusOK, "ok")
	cluster.Restart(1)
	cluster.WaitHealthy(1)
	waitHTTP(t, gw.Process, admin+"/readyz", http.StatusOK, "ready", 60*time.Second)
}
