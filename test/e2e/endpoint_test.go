package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestEndpointWithoutSockSuffix runs the real binary with a CSI_ENDPOINT whose socket does
// not end in .sock (the spec says every UNIX endpoint SHALL): the gateway serves it, and warns
// at start naming the socket and where to rename it.
func TestEndpointWithoutSockSuffix(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi-endpoint")
	t.Setenv("CSI_ENDPOINT", "unix://"+sock)
	p := testutil.Start(t, "serve", "--data-dir", filepath.Join(dir, "data"))
	waitOutput(t, p, "gateway ready", 30*time.Second)
	waitOutput(t, p, "listeners[0]: the socket "+sock+" does not end in .sock, as CSI requires of every UNIX endpoint; serving it anyway", time.Second)

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Fatalf("Probe on %s: %v\n%s", sock, err, p.Output())
	}
}
