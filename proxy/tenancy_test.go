package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// metadataDriver streams two answers to GetMetadataAllocated and records the snapshot IDs
// it was asked about.
type metadataDriver struct {
	csi.UnimplementedSnapshotMetadataServer
	mu   sync.Mutex
	seen []string
}

func (d *metadataDriver) GetMetadataAllocated(req *csi.GetMetadataAllocatedRequest, s csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	d.mu.Lock()
	d.seen = append(d.seen, req.GetSnapshotId())
	d.mu.Unlock()
	for i := range 2 {
		if err := s.Send(&csi.GetMetadataAllocatedResponse{VolumeCapacityBytes: int64(i + 1)}); err != nil {
			return err
		}
	}
	return nil
}

// TestTenantStreamScoped: a tenant's server-streaming call (SnapshotMetadata) reaches the
// backend with the snapshot's backend ID and streams back unchanged; another tenant's (or an
// unknown) snapshot is NOT_FOUND and never reaches the backend.
func TestTenantStreamScoped(t *testing.T) { onEachTransport(t, testTenantStreamScoped) }

func testTenantStreamScoped(t *testing.T, tr Transport) {
	dir := t.TempDir()
	drv := &metadataDriver{}
	gs := grpc.NewServer()
	csi.RegisterSnapshotMetadataServer(gs, drv)
	dl, err := net.Listen("unix", filepath.Join(dir, "driver.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(dl)
	defer gs.Stop()

	ledger, err := tenancy.Open(filepath.Join(dir, "tenancy.db"), map[string]tenancy.Quota{"blue": {}, "green": {}})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	for snap, tenant := range map[string]string{"snap-blue": "blue", "snap-green": "green"} {
		if err := ledger.Record(tenancy.Snapshot, snap, tenancy.Record{Tenant: tenant}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := NewServer(Options{
		Routes:   []Route{{Methods: []string{"*"}, Backend: "array"}},
		Backends: map[string]backends.Backend{"array": newGRPCBackend(t, tr, dl.Addr().String(), nil, nil)},
		Log:      slog.New(slog.DiscardHandler), Tenancy: ledger, Transport: tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "blue.sock")
	l, err := Listen(Endpoint{Scheme: "unix", Address: sock}, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l, ListenerPolicy{Tenant: "blue"})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := csi.NewSnapshotMetadataClient(conn)

	read := func(id string) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := client.GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{SnapshotId: id})
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			if _, err := s.Recv(); err == io.EOF {
				return n, nil
			} else if err != nil {
				return n, err
			}
			n++
		}
	}
	if n, err := read("blue.snap-blue"); err != nil || n != 2 {
		t.Fatalf("blue's own snapshot: %d answers, %v; want 2", n, err)
	}
	for _, id := range []string{"blue.snap-green", "green.snap-green", "snap-green", "blue.snap-none"} {
		if _, err := read(id); status.Code(err) != codes.NotFound {
			t.Errorf("snapshot %q: %v, want NOT_FOUND", id, err)
		}
	}
	drv.mu.Lock()
	defer drv.mu.Unlock()
	if len(drv.seen) != 1 || drv.seen[0] != "snap-blue" {
		t.Errorf("the backend was asked about %v, want only [snap-blue]", drv.seen)
	}
}
