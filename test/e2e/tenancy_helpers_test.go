package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// sharedController is the shared-controller deployment, from real binaries:
//
//	cluster gateway per tenant (Unix socket) → grpc over mTLS (its own SPIFFE ID) →
//	central gateway (one tcp:// listener; each client rule names the tenant) → appliance
//
// The central gateway keeps its tenancy ledger in dir, or where storeYAML says.
type sharedController struct {
	dir       string
	appliance string            // the appliance's endpoint (unscoped: the ground truth)
	clusters  map[string]string // tenant → its cluster gateway's endpoint
	central   *testutil.Process
	// centralConfig restarts the central gateway on the same files.
	centralConfig string
	centralAddr   string       // its tcp:// listener's host:port
	ca            *testutil.CA // signs every certificate
	// admin, when set before the configuration is written, is the central gateway's admin
	// listener (host:port); each replica gets one of its own (adminOf).
	admin   string
	adminOf map[string]string // a replica's listener address → its admin listener's
}

// tenantSPIFFEID is the identity of a tenant's cluster gateway.
func tenantSPIFFEID(tenant string) string { return "spiffe://example.org/cluster/" + tenant }

// startSharedController starts the appliance, the central gateway with the given tenants
// (YAML lines under "tenancy.tenants:"), extra listener keys, the ledger's store (the YAML
// line "  store: …" under "tenancy:"; empty: a bbolt file in dir, by tenancy.ledger) and,
// withTokenKey, a tenancy.tokenKeyFile, and one cluster gateway per tenant.
func startSharedController(t *testing.T, dir string, tenants []string, tenantsYAML, listenerYAML, storeYAML string, withTokenKey bool) *sharedController {
	t.Helper()
	sc := startCentralSide(t, dir, tenants, tenantsYAML, listenerYAML, storeYAML, withTokenKey)
	sc.startClusterGateways(t, tenants, []string{sc.centralAddr})
	return sc
}

// startCentralSide is startSharedController without the cluster gateways: the appliance and
// the central gateway, admitting the tenants' cluster gateways.
func startCentralSide(t *testing.T, dir string, tenants []string, tenantsYAML, listenerYAML, storeYAML string, withTokenKey bool) *sharedController {
	t.Helper()
	sc := newSharedController(t, dir)
	sc.appliance = "unix://" + filepath.Join(dir, "appliance.sock")
	testutil.Start(t, "appliance", "--data", filepath.Join(dir, "data"), "--endpoint", sc.appliance, "--max-volumes-per-node", "0")
	testutil.Dial(t, sc.appliance)
	sc.writeCentralConfig(t, sc.appliance, tenants, tenantsYAML, listenerYAML, storeYAML, withTokenKey)
	sc.startCentral(t)
	return sc
}

// newSharedController is a shared controller with its CA and nothing started yet.
func newSharedController(t *testing.T, dir string) *sharedController {
	t.Helper()
	return &sharedController{dir: dir, clusters: map[string]string{}, ca: testutil.NewCA(t, "shared-controller CA")}
}

// writeCentralConfig writes the central gateway's configuration: one tcp:// mTLS listener
// admitting the tenants' cluster gateways (and listenerYAML, more keys of that listener), the
// grpc backend at backend, and tenancy with the given store (see startSharedController). With
// sc.admin set, it has an admin listener there.
func (sc *sharedController) writeCentralConfig(t *testing.T, backend string, tenants []string, tenantsYAML, listenerYAML, storeYAML string, withTokenKey bool) {
	t.Helper()
	centralDir := filepath.Join(sc.dir, "central")
	mkdir(t, centralDir)
	cert, key, clientCA := testutil.ServerPEMFiles(t, centralDir, sc.ca, sc.ca.NewServerLeaf(t))
	sc.centralAddr = testutil.FreeAddr(t)
	tokenKey := ""
	if withTokenKey {
		tokenKey = "  tokenKeyFile: " + writeFile(t, filepath.Join(centralDir, "token.key"), strings.Repeat("c0ffee", 10)+"c0ff\n") + "\n"
	}
	if storeYAML == "" {
		storeYAML = "  ledger: " + filepath.Join(sc.dir, "tenancy.db")
	}
	admin := ""
	if sc.admin != "" {
		admin = fmt.Sprintf("admin: {listen: %q}\n", sc.admin)
	}
	var clients strings.Builder
	for _, tenant := range tenants {
		fmt.Fprintf(&clients, "      - {uri: %q, tenant: %s}\n", tenantSPIFFEID(tenant), tenant)
	}
	sc.centralConfig = writeFile(t, filepath.Join(sc.dir, "central.yaml"), fmt.Sprintf(`listeners:
  - endpoint: tcp://%s
    tls: {cert: %s, key: %s, clientCA: %s}
    clients:
%s%s
%sbackends: {appliance: {type: grpc, target: %q}}
routes: [{methods: ["*"], backend: appliance}]
tenancy:
%s
%s  tenants:
%s
`, sc.centralAddr, cert, key, clientCA, clients.String(), listenerYAML, admin, backend, storeYAML, tokenKey, tenantsYAML))
}

// startClusterGateways starts one cluster gateway per tenant, each with its own SPIFFE ID,
// reaching the central gateway at the addresses given (host:port) as failover targets in
// that order: with several, tenant i's list starts at addrs[i mod len], so that the tenants'
// calls go to different replicas.
func (sc *sharedController) startClusterGateways(t *testing.T, tenants, addrs []string) {
	t.Helper()
	for i, tenant := range tenants {
		cdir := filepath.Join(sc.dir, tenant)
		mkdir(t, cdir)
		leaf := sc.ca.NewLeaf(t, testutil.Leaf{URIs: []string{tenantSPIFFEID(tenant)}})
		crt, k, caFile := filepath.Join(cdir, "tls.crt"), filepath.Join(cdir, "tls.key"), filepath.Join(cdir, "ca.crt")
		testutil.WritePEM(t, crt, leaf.CertPEM)
		testutil.WritePEM(t, k, leaf.KeyPEM)
		testutil.WritePEM(t, caFile, sc.ca.PEM)
		var targets []string
		for j := range addrs {
			targets = append(targets, "dns:///"+addrs[(i+j)%len(addrs)])
		}
		endpoint := "unix://" + filepath.Join(sc.dir, tenant+".sock")
		testutil.Start(t, "serve", "--config", writeFile(t, filepath.Join(cdir, "gateway.yaml"), fmt.Sprintf(`listeners:
  - endpoint: %s
backends:
  central:
    type: grpc
    targets: [%s]
    tls: {ca: %s, cert: %s, key: %s, serverName: localhost}
routes: [{methods: ["*"], backend: central}]
`, endpoint, strings.Join(targets, ", "), caFile, crt, k)))
		testutil.Dial(t, endpoint)
		sc.clusters[tenant] = endpoint
	}
}

// startCentral starts (or restarts) the central gateway and waits until it serves.
func (sc *sharedController) startCentral(t *testing.T) {
	t.Helper()
	sc.central = testutil.Start(t, "serve", "--config", sc.centralConfig)
	waitOutput(t, sc.central, "gateway ready", 30*time.Second)
}

// startReplica starts another central gateway on the central gateway's configuration, but
// listening at an address of its own (addr; empty: a free port), which it returns with the
// process: a replica, which with the ledger in etcd serves the same tenants.
func (sc *sharedController) startReplica(t *testing.T, addr string) (*testutil.Process, string) {
	t.Helper()
	config, err := os.ReadFile(sc.centralConfig)
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = testutil.FreeAddr(t)
	}
	replica := strings.Replace(string(config), "tcp://"+sc.centralAddr, "tcp://"+addr, 1)
	if sc.admin != "" && addr != sc.centralAddr {
		if sc.adminOf == nil {
			sc.adminOf = map[string]string{sc.centralAddr: sc.admin}
		}
		if sc.adminOf[addr] == "" {
			sc.adminOf[addr] = testutil.FreeAddr(t)
		}
		replica = strings.Replace(replica, fmt.Sprintf("admin: {listen: %q}", sc.admin), fmt.Sprintf("admin: {listen: %q}", sc.adminOf[addr]), 1)
	}
	file := writeFile(t, filepath.Join(sc.dir, "central-"+strings.ReplaceAll(addr, ":", "-")+".yaml"), replica)
	p := testutil.Start(t, "serve", "--config", file)
	waitOutput(t, p, "gateway ready", 30*time.Second)
	return p, addr
}

// dialCentral connects straight to the central gateway as a tenant's cluster gateway does
// (mTLS, the tenant's SPIFFE ID), bypassing the cluster gateway, which serializes calls
// itself.
func (sc *sharedController) dialCentral(t *testing.T, tenant string) *grpc.ClientConn {
	t.Helper()
	return sc.dialCentralAt(t, tenant, sc.centralAddr)
}

// dialCentralAt is dialCentral to the central gateway (or replica) listening at addr.
func (sc *sharedController) dialCentralAt(t *testing.T, tenant, addr string) *grpc.ClientConn {
	t.Helper()
	leaf := sc.ca.NewLeaf(t, testutil.Leaf{URIs: []string{tenantSPIFFEID(tenant)}})
	creds := credentials.NewTLS(testutil.ClientTLS(t, []*testutil.CA{sc.ca}, leaf, 0, 0))
	conn, err := grpc.NewClient("dns:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
