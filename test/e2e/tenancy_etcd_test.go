package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestCentralReplicasOnEtcd: central gateways from the real binary keep the tenancy ledger in
// a real 3-member etcd (tenancy.store.etcd, mTLS). Two replicas on one configuration share a
// tenant's records and quota. With etcd's quorum lost, a tenant's call is UNAVAILABLE naming
// etcd well within the caller's deadline, and a replica restarted meanwhile starts and answers
// the same; with the quorum back, calls go through again on both.
func TestCentralReplicasOnEtcd(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	sc := startSharedController(t, t.TempDir(), []string{"blue"}, "    - {name: blue, maxVolumes: 2}", "", etcdStoreYAML(cluster), true)
	waitOutput(t, sc.central, "etcd https://127.0.0.1", 5*time.Second) // "tenancy on", ledger=etcd …
	second, secondAddr := sc.startReplica(t, "")
	replicas := []csi.ControllerClient{
		csi.NewControllerClient(sc.dialCentral(t, "blue")),
		csi.NewControllerClient(sc.dialCentralAt(t, "blue", secondAddr)),
	}
	ctx := callCtx(t)
	create := func(r csi.ControllerClient, name string) (*csi.Volume, error) {
		resp, err := r.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{{
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			}}})
		return resp.GetVolume(), err
	}
	listed := func(r csi.ControllerClient) int {
		t.Helper()
		resp, err := r.ListVolumes(ctx, &csi.ListVolumesRequest{})
		if err != nil {
			t.Fatalf("ListVolumes: %v", err)
		}
		return len(resp.GetEntries())
	}

	a, err := create(replicas[0], "pvc-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create(replicas[1], "pvc-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := create(replicas[0], "pvc-c"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a third volume under maxVolumes 2, created on the replica holding one: %v, want RESOURCE_EXHAUSTED", err)
	}
	if again, err := create(replicas[1], "pvc-a"); err != nil || again.GetVolumeId() != a.GetVolumeId() {
		t.Fatalf("pvc-a retried on the other replica: %v, %v; want %s", again, err, a.GetVolumeId())
	}
	for i, r := range replicas {
		if n := listed(r); n != 2 {
			t.Errorf("replica %d lists %d volumes of blue, want 2", i, n)
		}
	}

	// No quorum: answered UNAVAILABLE naming etcd, within the request timeout (2 s), long
	// before the caller's own deadline (30 s).
	cluster.Stop(1)
	cluster.Stop(2)
	unavailable := func(what string, r csi.ControllerClient) {
		t.Helper()
		callCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err := r.ListVolumes(callCtx, &csi.ListVolumesRequest{})
		if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "etcd at https://127.0.0.1") {
			t.Errorf("%s without etcd's quorum: %v %q; want UNAVAILABLE naming etcd", what, st.Code(), st.Message())
		}
		t.Logf("%s without etcd's quorum answered in %s", what, time.Since(start).Round(time.Millisecond))
	}
	unavailable("replica 0", replicas[0])
	second.Kill()
	sc.startReplica(t, secondAddr) // restarted meanwhile; the test stops it with the others
	unavailable("replica 1, restarted meanwhile", replicas[1])

	cluster.Restart(1)
	cluster.WaitHealthy(1)
	if _, err := replicas[1].DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: a.GetVolumeId()}); err != nil {
		t.Fatalf("with the quorum back, deleting pvc-a on the other replica: %v", err)
	}
	if _, err := create(replicas[0], "pvc-c"); err != nil {
		t.Fatalf("with the quorum back and room again: %v", err)
	}
	if n := listed(replicas[1]); n != 2 {
		t.Errorf("replica 1 lists %d volumes of blue, want 2", n)
	}
}

// TestTwoTenantsSanityOnEtcdReplicas: two tenants run csi-sanity at the same time, each
// through its cluster gateway, into 3 central replicas from the real binary on one real
// 3-member etcd, all in front of the same appliance. Each cluster gateway lists the 3
// replicas as failover targets, tenant cluster-a's starting at replica 0 and cluster-b's at
// replica 1, so the two suites' calls go to different replicas; both must pass.
func TestTwoTenantsSanityOnEtcdReplicas(t *testing.T) {
	twoTenantsSanity(t, func(t *testing.T, dir string, tenants []string, tenantsYAML string) *sharedController {
		cluster := testutil.StartEtcd(t, 3)
		sc := startCentralSide(t, dir, tenants, tenantsYAML, "", etcdStoreYAML(cluster), true)
		second, secondAddr := sc.startReplica(t, "")
		third, thirdAddr := sc.startReplica(t, "")
		sc.startClusterGateways(t, tenants, []string{sc.centralAddr, secondAddr, thirdAddr})
		t.Cleanup(func() {
			// The calls spread: each tenant's first target served that tenant's calls.
			replicas := []*testutil.Process{sc.central, second, third}
			for i, r := range replicas {
				var counts []string
				for _, tenant := range tenants {
					n := strings.Count(r.Output(), `"caller":"`+tenantSPIFFEID(tenant)+`"`)
					counts = append(counts, fmt.Sprintf("%s %d", tenant, n))
					if i < len(tenants) && tenant == tenants[i] && n == 0 {
						t.Errorf("replica %d, %s's first target, logged no call of %s", i, tenant, tenant)
					}
				}
				t.Logf("replica %d logged calls of: %s", i, strings.Join(counts, ", "))
			}
		})
		return sc
	})
}

// etcdStoreYAML is the "  store:" line under "tenancy:" that keeps the ledger in cluster,
// over mTLS.
func etcdStoreYAML(cluster *testutil.EtcdCluster) string {
	return fmt.Sprintf(`  store:
    etcd:
      endpoints: [%s]
      tls: {ca: %s, cert: %s, key: %s, serverName: %s}
      prefix: /e2e/
      requestTimeout: 2s
      leaseTTL: 3s`, strings.Join(cluster.Endpoints(), ", "), cluster.CA, cluster.Cert, cluster.Key, cluster.ServerName)
}
