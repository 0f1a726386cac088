package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestTwoHopSanity runs csi-sanity through a chain of real binaries, as a cluster gateway
// forwarding to a central one over mutual TLS would be deployed:
//
//	csi-sanity → cluster gateway (Unix socket) → grpc over mTLS, dns:///127.0.0.1:PORT →
//	central gateway (tcp:// listener admitting the cluster gateway's SPIFFE ID) →
//	appliance (gRPC on a Unix socket)
//
// It must pass what the appliance passes directly.
func TestTwoHopSanity(t *testing.T) {
	testutil.SanityVariants(t, []string{"mount"}, func(t *testing.T, access string) {
		if os.Geteuid() != 0 {
			t.Skip("csi-sanity's node specs mount volumes: run the tests as root")
		}
		dir := t.TempDir()
		const clusterID = "spiffe://example.org/cluster/gateway"

		// PKI: one CA; the central gateway serves a certificate for localhost/127.0.0.1,
		// the cluster gateway presents one carrying its SPIFFE ID.
		ca := testutil.NewCA(t, "two-hop CA")
		centralDir, clusterDir := filepath.Join(dir, "central"), filepath.Join(dir, "cluster")
		for _, d := range []string{centralDir, clusterDir} {
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		cert, key, clientCA := testutil.ServerPEMFiles(t, centralDir, ca, ca.NewServerLeaf(t))
		clusterLeaf := ca.NewLeaf(t, testutil.Leaf{URIs: []string{clusterID}})
		clusterCert, clusterKey, clusterCA := filepath.Join(clusterDir, "tls.crt"), filepath.Join(clusterDir, "tls.key"), filepath.Join(clusterDir, "ca.crt")
		testutil.WritePEM(t, clusterCert, clusterLeaf.CertPEM)
		testutil.WritePEM(t, clusterKey, clusterLeaf.KeyPEM)
		testutil.WritePEM(t, clusterCA, ca.PEM)

		// The appliance, on a Unix socket.
		applianceSock := "unix://" + filepath.Join(dir, "appliance.sock")
		testutil.Start(t, "appliance", "--data", filepath.Join(dir, "data"), "--endpoint", applianceSock, "--max-volumes-per-node", "4")
		testutil.Dial(t, applianceSock)

		// The central gateway: mTLS on TCP, only the cluster gateway admitted.
		addr := testutil.FreeAddr(t)
		writeConfig := func(name, yaml string) string {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
		central := testutil.Start(t, "serve", "--config", writeConfig("central.yaml", fmt.Sprintf(`listeners:
  - endpoint: tcp://%s
    tls: {cert: %s, key: %s, clientCA: %s}
    clients: [{uri: %q}]
backends: {appliance: {type: grpc, target: %q}}
routes: [{methods: ["*"], backend: appliance}]
`, addr, cert, key, clientCA, clusterID, applianceSock)))
		waitOutput(t, central, "gateway ready", 30*time.Second)

		// The cluster gateway: a Unix socket in front, the central gateway behind, over mTLS.
		endpoint := "unix://" + filepath.Join(dir, "cluster.sock")
		testutil.Start(t, "serve", "--config", writeConfig("cluster.yaml", fmt.Sprintf(`listeners:
  - endpoint: %s
backends:
  central:
    type: grpc
    target: dns:///%s
    tls: {ca: %s, cert: %s, key: %s, serverName: localhost}
routes: [{methods: ["*"], backend: central}]
`, endpoint, addr, clusterCA, clusterCert, clusterKey)))
		testutil.Dial(t, endpoint)

		testutil.RunSanity(t, testutil.ApplianceSanityConfig(dir, endpoint, access))
	})
}
