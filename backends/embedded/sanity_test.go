package embedded_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestSanity runs csi-sanity against the appliance served on a real Unix socket, once with
// filesystem volumes and once with block volumes. The node specs mount for real and need root.
func TestSanity(t *testing.T) {
	testutil.SanityVariants(t, []string{"mount", "block"}, func(t *testing.T, accessType string) {
		if os.Geteuid() != 0 {
			t.Skip("csi-sanity's node specs mount volumes: run the tests as root")
		}
		dir := t.TempDir()
		a, err := embedded.Open(embedded.Config{DataDir: filepath.Join(dir, "data"), MaxVolumesPerNode: testutil.ApplianceMaxVolumesPerNode}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		sock := filepath.Join(dir, "csi.sock")
		lis, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		a.Register(srv)
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)

		testutil.RunSanity(t, testutil.ApplianceSanityConfig(dir, "unix://"+sock, accessType))
	})
}
