package proxy

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// openEtcdLedger opens a ledger in cluster under prefix (a replica of the central gateway),
// closed at the end of the test (after the gateways using it).
func openEtcdLedger(t *testing.T, cluster *testutil.EtcdCluster, prefix string, quotas map[string]tenancy.Quota) *tenancy.Ledger {
	t.Helper()
	tc, err := tlsconf.NewClient(tlsconf.ClientFiles{CA: cluster.CA, Cert: cluster.Cert, Key: cluster.Key, ServerName: cluster.ServerName})
	if err != nil {
		t.Fatal(err)
	}
	store, err := tenancy.OpenEtcd(tenancy.EtcdConfig{Endpoints: cluster.Endpoints(), TLS: tc, Prefix: prefix, RequestTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := tenancy.New(store, quotas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	return ledger
}

// TestTenancyOnEtcd: two central gateways (replicas) keep their tenancy ledger in one etcd
// and serve the same backend. Twenty creates of one tenant spread over both at once, under a
// quota of three volumes: three OK, the rest RESOURCE_EXHAUSTED. Each replica sees what the
// other recorded: the tenant lists its three volumes through either; a retried create
// landing on the other replica returns the same volume and is not counted twice; a volume
// created through one is deleted through the other and frees the quota for both; the other
// tenant sees none of it and cannot delete it.
func TestTenancyOnEtcd(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	quotas := map[string]tenancy.Quota{"blue": {MaxVolumes: 3}, "green": {}}
	be := openEmbedded(t)
	// One replica on each transport: the ledger is the same whichever serves the call.
	replicas := []*tenantGateway{
		startTenantGateway(t, TransportGRPC, be, openEtcdLedger(t, cluster, "/proxy-test/", quotas), "blue", "green"),
		startTenantGateway(t, TransportFrames, be, openEtcdLedger(t, cluster, "/proxy-test/", quotas), "blue", "green"),
	}
	ctx := serverCallCtx(t)

	var mu sync.Mutex
	created := map[string]string{} // name → the tenant's volume ID
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			name := fmt.Sprintf("pvc-%d", i)
			resp, err := replicas[i%2].controller("blue").CreateVolume(ctx, serverCreateVolumeRequest(name))
			if err != nil {
				if status.Code(err) != codes.ResourceExhausted {
					t.Errorf("create %s: %v", name, err)
				}
				return
			}
			mu.Lock()
			created[name] = resp.GetVolume().GetVolumeId()
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(created) != 3 {
		t.Fatalf("%d of 20 creates over two replicas succeeded under maxVolumes 3: %v", len(created), created)
	}
	listed := func(r *tenantGateway, tenant string) map[string]bool {
		t.Helper()
		resp, err := r.controller(tenant).ListVolumes(ctx, &csi.ListVolumesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, e := range resp.GetEntries() {
			ids[e.GetVolume().GetVolumeId()] = true
		}
		return ids
	}
	for i, r := range replicas {
		ids := listed(r, "blue")
		for name, id := range created {
			if !ids[id] {
				t.Errorf("replica %d does not list blue's %s (%s): %v", i, name, id, ids)
			}
		}
		if len(ids) != 3 {
			t.Errorf("replica %d lists %d volumes of blue, want 3", i, len(ids))
		}
		if ids := listed(r, "green"); len(ids) != 0 {
			t.Errorf("replica %d lists blue's volumes to green: %v", i, ids)
		}
	}

	// A create retried on the other replica is the same volume, and needs no quota.
	var name, id string
	for name, id = range created {
		break
	}
	for _, r := range replicas {
		resp, err := r.controller("blue").CreateVolume(ctx, serverCreateVolumeRequest(name))
		if err != nil || resp.GetVolume().GetVolumeId() != id {
			t.Fatalf("retrying the create of %s: %v, %v; want volume %s", name, resp, err, id)
		}
	}
	// Green cannot delete it through either replica (OK, as for an absent volume; nothing done).
	for _, r := range replicas {
		if _, err := r.controller("green").DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Errorf("green's delete of blue's volume: %v, want OK doing nothing", err)
		}
	}
	if ids := listed(replicas[0], "blue"); !ids[id] {
		t.Fatalf("green's delete removed blue's volume %s", id)
	}
	// Deleted through the replica that did not create it; the room is free on both.
	if _, err := replicas[1].controller("blue").DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := replicas[0].controller("blue").CreateVolume(ctx, serverCreateVolumeRequest("pvc-new")); err != nil {
		t.Fatalf("a create after a delete through the other replica: %v", err)
	}
	_, err := replicas[1].controller("blue").CreateVolume(ctx, serverCreateVolumeRequest("pvc-newer"))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a fourth volume through the other replica: %v, want RESOURCE_EXHAUSTED", err)
	}
}
