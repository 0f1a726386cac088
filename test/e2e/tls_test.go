package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestMTLSListenerBinary runs the real binary with a TCP mTLS listener and a plaintext one:
// an allowed client's Probe answers, an unlisted one gets PERMISSION_DENIED, SIGHUP reloads
// the TLS files, and the plaintext listener is warned about.
func TestMTLSListenerBinary(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "e2e CA")
	cert, key, clientCA := testutil.ServerPEMFiles(t, dir, ca, ca.NewServerLeaf(t))
	addr, plainAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	config := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf(`listeners:
  - endpoint: tcp://%s
    tls: {cert: %s, key: %s, clientCA: %s}
    clients: [{uri: "spiffe://example.org/allowed"}]
  - endpoint: tcp://%s
    insecure: true
backends: {embedded: {type: embedded, dataDir: %s}}
routes: [{methods: ["*"], backend: embedded}]
`, addr, cert, key, clientCA, plainAddr, filepath.Join(dir, "data"))
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testutil.Start(t, "serve", "--config", config)
	waitOutput(t, p, "gateway ready", 30*time.Second)
	waitOutput(t, p, fmt.Sprintf("listeners[1]: plaintext TCP: anyone who can reach %s can call the gateway", plainAddr), time.Second)

	dial := func(uri string) *grpc.ClientConn {
		creds := credentials.NewTLS(testutil.ClientTLS(t, []*testutil.CA{ca}, ca.NewLeaf(t, testutil.Leaf{URIs: []string{uri}}), 0, 0))
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := csi.NewIdentityClient(dial("spiffe://example.org/allowed")).Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Fatalf("an allowed client's Probe: %v\n%s", err, p.Output())
	}
	// Refused in the handshake: the connection is closed, and the gateway says why in its log.
	_, err := csi.NewIdentityClient(dial("spiffe://example.org/unlisted")).Probe(ctx, &csi.ProbeRequest{})
	if st := status.Convert(err); st.Code() != codes.Unavailable {
		t.Errorf("an unlisted client's Probe: %v %q, want UNAVAILABLE", st.Code(), st.Message())
	}
	waitOutput(t, p, "client identity spiffe://example.org/unlisted is not in listeners[0].clients", 10*time.Second)

	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "SIGHUP: TLS files reloaded", 10*time.Second)
	testutil.WritePEM(t, cert, []byte("garbage"))
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "SIGHUP: TLS reload failed", 10*time.Second)
	if _, err := csi.NewIdentityClient(dial("spiffe://example.org/allowed")).Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Errorf("after a failed reload: %v", err)
	}
}
