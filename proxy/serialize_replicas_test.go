package proxy

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tu "github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// racyBackend is a backend whose CreateVolume is unsafe under concurrent identical calls, as
// real arrays can be: it looks the name up, waits (window, or until gate is closed or its
// call's context ends), then creates. Two identical creates in flight together make two
// volumes; a create whose context ended while it waited makes none.
type racyBackend struct {
	countingBackend // no backend inside: every method is answered here
	window          time.Duration
	gate            chan struct{} // nil: wait window
	entered         chan string   // the name of each create that found no volume and waits
	deleting        chan struct{} // nil: deletes answer at once; else each waits until it is closed

	volumesMu sync.Mutex
	volumes   map[string][]string // name → the IDs created under it
	created   int
}

func newRacyBackend(window time.Duration, gate chan struct{}) *racyBackend {
	return &racyBackend{countingBackend: countingBackend{n: map[string]int{}}, window: window, gate: gate,
		entered: make(chan string, 100), volumes: map[string][]string{}}
}

func (b *racyBackend) Unary(ctx context.Context, method string, raw []byte) ([]byte, error) {
	b.countingBackend.mu.Lock()
	b.n[method]++
	b.countingBackend.mu.Unlock()
	switch method {
	case "/csi.v1.Controller/CreateVolume":
		var req csi.CreateVolumeRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		if id, ok := b.lookup(req.GetName()); ok {
			return b.answer(id, &req)
		}
		b.entered <- req.GetName()
		var wait <-chan time.Time
		if b.gate == nil {
			wait = time.After(b.window)
		}
		select {
		case <-wait:
		case <-b.gate:
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		b.volumesMu.Lock()
		b.created++
		id := fmt.Sprintf("vol-%d", b.created)
		b.volumes[req.GetName()] = append(b.volumes[req.GetName()], id)
		b.volumesMu.Unlock()
		return b.answer(id, &req)
	case "/csi.v1.Controller/DeleteVolume":
		var req csi.DeleteVolumeRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		if b.deleting != nil {
			b.entered <- req.GetVolumeId()
			<-b.deleting
		}
		b.volumesMu.Lock()
		for name, ids := range b.volumes {
			for i, id := range ids {
				if id == req.GetVolumeId() {
					b.volumes[name] = append(ids[:i:i], ids[i+1:]...)
				}
			}
		}
		b.volumesMu.Unlock()
		return proto.Marshal(&csi.DeleteVolumeResponse{})
	}
	return nil, status.Errorf(codes.Unimplemented, "racy backend: %s", method)
}

func (b *racyBackend) lookup(name string) (string, bool) {
	b.volumesMu.Lock()
	defer b.volumesMu.Unlock()
	if ids := b.volumes[name]; len(ids) > 0 {
		return ids[0], true
	}
	return "", false
}

func (b *racyBackend) answer(id string, req *csi.CreateVolumeRequest) ([]byte, error) {
	return proto.Marshal(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}})
}

// volumesNamed returns how many volumes the backend holds under the tenant's name.
func (b *racyBackend) volumesNamed(name string) int {
	b.volumesMu.Lock()
	defer b.volumesMu.Unlock()
	return len(b.volumes[name])
}

func (b *racyBackend) Stream(context.Context, string, grpc.ServerStream) error {
	return status.Error(codes.Unimplemented, "racy backend: no streams")
}
func (b *racyBackend) Ready(context.Context) error { return nil }
func (b *racyBackend) Close() error                { return nil }

// replica is one central gateway of a test: its server, its metrics and its ledger.
type replica struct {
	*tenantGateway
	metrics *Metrics
	ledger  *tenancy.Ledger
}

// startReplica serves be to tenant "blue" through ledger on transport tr, with metrics.
func startReplica(t *testing.T, tr Transport, be *racyBackend, ledger *tenancy.Ledger) *replica {
	t.Helper()
	o := tenantGatewayOptions(tr, be, ledger)
	o.Metrics = NewMetrics("", prometheus.NewRegistry())
	o.Metrics.WatchTenancy(ledger)
	return &replica{tenantGateway: startTenantGatewayWith(t, o, "blue"), metrics: o.Metrics, ledger: ledger}
}

func (r *replica) create(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return r.controller("blue").CreateVolume(ctx, req)
}

// abortedElsewhere is what the replica's csigw_replica_aborted_total says of CreateVolume.
func (r *replica) abortedElsewhere() float64 {
	return testutil.ToFloat64(r.metrics.locks.aborted.WithLabelValues("/csi.v1.Controller/CreateVolume"))
}

// lockWaits is how many waits the replica's csigw_replica_lock_wait_seconds counted.
func (r *replica) lockWaits(t *testing.T) uint64 {
	t.Helper()
	mfs, err := r.metrics.gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "csigw_replica_lock_wait_seconds" {
			var n uint64
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
			return n
		}
	}
	return 0
}

// TestReplicasIdenticalCreatesOneVolume: two central replicas on one etcd, an identical
// CreateVolume sent to both at once, against a backend that makes two volumes of two
// concurrent identical creates: one volume, and both callers get it. Five names per run.
func TestReplicasIdenticalCreatesOneVolume(t *testing.T) {
	cluster := tu.StartEtcd(t, 3)
	be := newRacyBackend(300*time.Millisecond, nil)
	prefix := "/" + t.Name() + "/"
	replicas := []*replica{
		startReplica(t, TransportGRPC, be, openEtcdLedger(t, cluster, prefix, nil)),
		startReplica(t, TransportFrames, be, openEtcdLedger(t, cluster, prefix, nil)),
	}
	ctx := serverCallCtx(t)
	for round := range 5 {
		name := fmt.Sprintf("pvc-%d", round)
		var ids [2]string
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, r := range replicas {
			wg.Go(func() {
				<-start
				resp, err := r.create(ctx, serverCreateVolumeRequest(name))
				if err != nil {
					t.Errorf("replica %d: create %s: %v", i, name, err)
					return
				}
				ids[i] = resp.GetVolume().GetVolumeId()
			})
		}
		close(start)
		wg.Wait()
		if ids[0] != ids[1] {
			t.Errorf("%s: the replicas answered %q and %q, want one volume", name, ids[0], ids[1])
		}
		if n := be.volumesNamed("blue." + name); n != 1 {
			t.Errorf("%s: %d volumes on the backend, want 1", name, n)
		}
	}
	for i, r := range replicas {
		if n := r.abortedElsewhere(); n != 0 {
			t.Errorf("replica %d refused %v identical creates, want 0 (they wait)", i, n)
		}
	}
	assertNoLocks(t, cluster, prefix)
}

// TestReplicasCreateBesideDeleteOfItsVolume: while one replica deletes a volume, a create of
// the name it was created under, on another replica, is ABORTED rather than run beside the
// delete: the create is keyed by its name and the delete by the volume's ID, and without the
// delete's lock of the name the create would find the volume being deleted and record it
// after the delete forgot it (a ledger entry of nothing), or create it anew outside the quota
// once the delete was done. The chaos test (test/e2e TestChaosReplicasUnderLoad) found both.
// The same with a name too long to take the tenant's prefix whole: its backend name is cut
// and hashed, and the delete finds the name in the volume's record (it locked none before).
func TestReplicasCreateBesideDeleteOfItsVolume(t *testing.T) {
	cluster := tu.StartEtcd(t, 3)
	for _, tc := range []struct{ what, name string }{
		{"short", "pvc-1"},
		{"long", strings.Repeat("p", 120) + "-long"},
	} {
		t.Run(tc.what, func(t *testing.T) { testCreateBesideDeleteOfItsVolume(t, cluster, tc.name) })
	}
}

func testCreateBesideDeleteOfItsVolume(t *testing.T, cluster *tu.EtcdCluster, name string) {
	be := newRacyBackend(0, nil)
	be.deleting = make(chan struct{})
	prefix := "/" + t.Name() + "/"
	deleting := startReplica(t, TransportGRPC, be, openEtcdLedger(t, cluster, prefix, nil))
	creating := startReplica(t, TransportFrames, be, openEtcdLedger(t, cluster, prefix, nil))
	ctx := serverCallCtx(t)
	first, err := creating.create(ctx, serverCreateVolumeRequest(name))
	if err != nil {
		t.Fatal(err)
	}
	<-be.entered // the create's wait
	deleted := make(chan error, 1)
	go func() {
		_, err := deleting.controller("blue").DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: first.GetVolume().GetVolumeId()})
		deleted <- err
	}()
	<-be.entered // the delete is in the backend
	_, err = creating.create(ctx, serverCreateVolumeRequest(name))
	if st := status.Convert(err); st.Code() != codes.Aborted || !strings.Contains(st.Message(), "DeleteVolume is already in progress on another replica") {
		t.Errorf("a create of the name of a volume being deleted: %v %q; want ABORTED naming the delete", st.Code(), st.Message())
	}
	close(be.deleting)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	again, err := creating.create(ctx, serverCreateVolumeRequest(name))
	if err != nil {
		t.Fatal(err)
	}
	if again.GetVolume().GetVolumeId() == first.GetVolume().GetVolumeId() {
		t.Errorf("the create after the delete answered the deleted volume %s", again.GetVolume().GetVolumeId())
	}
	gone, _ := tenancy.UnscopeID("blue", first.GetVolume().GetVolumeId())
	if _, recorded, err := deleting.ledger.Lookup(ctx, tenancy.Volume, gone); err != nil || recorded {
		t.Errorf("the deleted volume %s is still recorded (%v)", gone, err)
	}
	assertNoLocks(t, cluster, prefix)
}

// TestReplicaKilledMidCall: a replica is killed (its lease revoked, its store closed) while
// its CreateVolume is blocked in the backend until its deadline. The other replica refuses
// the object's operations while that backend call may be running — a different create at
// once, an identical one whose deadline comes first at once — and an identical one with time
// to spare waits for the dead call's deadline and then proceeds: one volume. Nothing stays
// locked after that.
func TestReplicaKilledMidCall(t *testing.T) {
	cluster := tu.StartEtcd(t, 3)
	be := newRacyBackend(0, make(chan struct{})) // creates wait for their deadline
	prefix := "/" + t.Name() + "/"
	dying := startReplica(t, TransportGRPC, be, openEtcdLedger(t, cluster, prefix, nil))
	survivor := startReplica(t, TransportFrames, be, openEtcdLedger(t, cluster, prefix, nil))
	testDeadCallBlocks(t, be, dying, func() *replica {
		dying.ledger.Close() // the lease is revoked: the replica is gone for etcd
		return survivor
	})
	assertNoLocks(t, cluster, prefix)
}

// TestRestartMidCallBbolt: the same across a restart of a single central gateway on a bbolt
// ledger: the operation recorded in flight before the ledger was closed blocks the object
// in the reopened one until its deadline, and nothing stays locked after that.
func TestRestartMidCallBbolt(t *testing.T) {
	be := newRacyBackend(0, make(chan struct{}))
	path := filepath.Join(t.TempDir(), "tenancy.db")
	ledger, err := tenancy.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := startReplica(t, TransportFrames, be, ledger)
	after := testDeadCallBlocks(t, be, before, func() *replica {
		ledger.Close() // the process stops; its backend call goes on until its deadline
		return startReplica(t, TransportGRPC, be, openLedger(t, path, nil))
	})
	after.ledger.Close()
	// Reopened once more: nothing is left locked.
	again := startReplica(t, TransportFrames, be, openLedger(t, path, nil))
	req := serverCreateVolumeRequest("pvc-other")
	if _, err := again.create(serverCallCtx(t), req); err != nil {
		t.Fatalf("a create after a second reopening: %v", err)
	}
}

// testDeadCallBlocks starts a CreateVolume on dying that blocks in be until its deadline,
// then kill()s dying and, on the replica kill returns, checks what a dead replica's call in
// flight means for other calls on the object (see TestReplicaKilledMidCall).
func testDeadCallBlocks(t *testing.T, be *racyBackend, dying *replica, kill func() *replica) *replica {
	const name = "pvc-1"
	deadline := time.Now().Add(8 * time.Second)
	dead := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		_, err := dying.create(ctx, serverCreateVolumeRequest(name))
		dead <- err
	}()
	select {
	case <-be.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first create did not reach the backend")
	}
	survivor := kill()
	ctx := serverCallCtx(t)

	other := serverCreateVolumeRequest(name)
	other.CapacityRange.RequiredBytes *= 2
	_, err := survivor.create(ctx, other)
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "replica that stopped") ||
		!strings.Contains(err.Error(), "its backend call may run until") {
		t.Errorf("a different create of %s while the dead call may run: %v, want ABORTED naming the stopped replica and its deadline", name, err)
	}
	if time.Until(deadline) > 3*time.Second {
		early, cancel := context.WithDeadline(ctx, deadline.Add(-2*time.Second))
		_, err = survivor.create(early, serverCreateVolumeRequest(name))
		cancel()
		if status.Code(err) != codes.Aborted {
			t.Errorf("an identical create whose deadline comes before the dead call's: %v, want ABORTED at once", err)
		}
	}
	deadErr := make(chan error, 1)
	go func() {
		deadErr <- <-dead
		close(be.gate) // creates from now on do not wait
	}()
	late, cancel := context.WithDeadline(context.Background(), deadline.Add(20*time.Second))
	defer cancel()
	resp, err := survivor.create(late, serverCreateVolumeRequest(name))
	if err != nil {
		t.Fatalf("an identical create with time to spare: %v, want it to wait for the dead call and proceed", err)
	}
	if now := time.Now(); now.Before(deadline) {
		t.Errorf("the identical create proceeded at %s, before the dead call's deadline %s", now, deadline)
	} else {
		t.Logf("the dead call's lock outlived its deadline by %s (its create answered)", now.Sub(deadline).Round(time.Millisecond))
	}
	if err := <-deadErr; status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("the dead replica's create: %v, want DEADLINE_EXCEEDED", err)
	}
	if n := be.volumesNamed("blue." + name); n != 1 {
		t.Errorf("%d volumes named %s on the backend, want 1", n, name)
	}
	if n := survivor.abortedElsewhere(); n < 1 {
		t.Errorf("csigw_replica_aborted_total counted %v refusals, want at least 1", n)
	}
	if n := survivor.lockWaits(t); n != 1 {
		t.Errorf("csigw_replica_lock_wait_seconds counted %d waits, want 1", n)
	}
	// Nothing stays locked: the volume is deleted and its name taken again at once.
	if _, err := survivor.controller("blue").DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId()}); err != nil {
		t.Fatalf("deleting the volume: %v", err)
	}
	if _, err := survivor.create(ctx, other); err != nil {
		t.Fatalf("the different create after the dead call's deadline: %v", err)
	}
	return survivor
}

// assertNoLocks fails the test if any operation key is left under prefix in cluster.
func assertNoLocks(t *testing.T, cluster *tu.EtcdCluster, prefix string) {
	t.Helper()
	tc, err := tlsconf.NewClient(tlsconf.ClientFiles{CA: cluster.CA, Cert: cluster.Cert, Key: cluster.Key, ServerName: cluster.ServerName})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	client, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), TLS: tc.Config(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	resp, err := client.Get(serverCallCtx(t), prefix+"ops/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		t.Errorf("left locked: %s", kv.Key)
	}
}
