package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// chaosRig is the shared controller the chaos tests break: 3 central replicas from the real
// binary, their ledger in a real 3-member etcd, in front of a racyDriver served by the test,
// and 2 tenants with a quota of chaosQuota volumes each.
//
// The tenants' calls go straight to the replicas over mTLS with each tenant's own client
// certificate (its cluster gateway's SPIFFE ID), each call to a replica picked at random: that
// is what the central replicas see behind the Service of the real deployment, where the
// connections of a cluster's gateway and of its provisioner's retries land on any replica. A
// cluster gateway in between would join its identical calls in its own process and send each
// cluster's calls to one replica at a time, so identical calls would rarely meet across
// replicas — which is what the chaos is there to test.
type chaosRig struct {
	sc      *sharedController
	cluster *testutil.EtcdCluster
	driver  *racyDriver
	addrs   []string // the replicas' listeners

	locks *chaosLockWatch // the replicas' operation locks in etcd, watched from the start

	mu           sync.Mutex
	procs        []*testutil.Process               // by replica
	kills        []chaosKill                       // the replicas killed
	etcdRestarts [][2]time.Time                    // an etcd member's kill and its return to health
	ctl          map[string][]csi.ControllerClient // tenant → a client per replica
}

// chaosKill is a replica killed: its process, when, and etcd's revision just after.
type chaosKill struct {
	pid int32
	at  time.Time
	rev int64
}

var chaosTenants = []string{"blue", "green"}

const (
	chaosQuota     = 8
	chaosVolumes   = 10 // names per tenant: pvc-0 … pvc-9 (plus base-0 and base-1, never deleted)
	chaosSnapshots = 6  // snap-0 … snap-5, of base-0 and base-1
	chaosWorkers   = 16
)

func startChaosRig(t *testing.T) *chaosRig {
	t.Helper()
	dir := t.TempDir()
	r := &chaosRig{cluster: testutil.StartEtcd(t, 3), ctl: map[string][]csi.ControllerClient{}}
	r.locks = watchChaosLocks(t, r.cluster, "/e2e/") // etcdStoreYAML's prefix
	r.driver, _ = startRacyDriver(t, dir, 30*time.Millisecond)
	r.sc = newSharedController(t, dir)
	r.sc.admin = testutil.FreeAddr(t)
	var quotas []string
	for _, tenant := range chaosTenants {
		quotas = append(quotas, fmt.Sprintf("    - {name: %s, maxVolumes: %d}", tenant, chaosQuota))
	}
	r.sc.writeCentralConfig(t, "unix://"+dir+"/driver.sock", chaosTenants, strings.Join(quotas, "\n"), "", etcdStoreYAML(r.cluster), true)
	r.sc.startCentral(t)
	r.procs, r.addrs = []*testutil.Process{r.sc.central}, []string{r.sc.centralAddr}
	for range 2 {
		p, addr := r.sc.startReplica(t, "")
		r.procs, r.addrs = append(r.procs, p), append(r.addrs, addr)
	}
	for _, tenant := range chaosTenants {
		for _, addr := range r.addrs {
			r.ctl[tenant] = append(r.ctl[tenant], csi.NewControllerClient(r.sc.dialCentralAt(t, tenant, addr)))
		}
	}
	return r
}

// killReplica kills replica i with SIGKILL while one of its creates is in flight at the
// backend (or after 10 s without one), reads etcd's revision (the killed creates' locks all
// exist in it), and starts the replica again at once on the same address.
func (r *chaosRig) killReplica(t *testing.T, i int) {
	r.mu.Lock()
	p := r.procs[i]
	r.mu.Unlock()
	pid := int32(p.PID())
	for wait := time.Now().Add(10 * time.Second); !r.driver.creating(pid) && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	p.Kill()
	kill := chaosKill{pid: pid, at: time.Now()}
	var err error
	if kill.rev, err = r.locks.revision(context.Background()); err != nil {
		t.Errorf("reading etcd's revision after killing replica %d: %v", i, err)
	}
	r.mu.Lock()
	r.kills = append(r.kills, kill)
	r.mu.Unlock()
	p, _ = r.sc.startReplica(t, r.addrs[i])
	r.mu.Lock()
	r.procs[i] = p
	r.mu.Unlock()
}

// client is tenant's connection to a replica picked at random.
func (r *chaosRig) client(tenant string) csi.ControllerClient {
	return r.ctl[tenant][rand.IntN(len(r.addrs))]
}

// chaosCall is one call of the load and its answer.
type chaosCall struct {
	method      string
	code        codes.Code
	message     string
	took, limit time.Duration
}

// chaosLoad drives the tenants' calls and keeps what they were answered.
type chaosLoad struct {
	r        *chaosRig
	deadline time.Duration // each call's

	mu      sync.Mutex
	calls   []chaosCall
	ids     map[string]map[string]string // tenant → name → the volume ID its create answered
	pending map[string]map[string]bool   // tenant → volume IDs whose delete got no definitive answer
	done    atomic.Int64
}

func newChaosLoad(r *chaosRig, deadline time.Duration) *chaosLoad {
	l := &chaosLoad{r: r, deadline: deadline, ids: map[string]map[string]string{}, pending: map[string]map[string]bool{}}
	for _, tenant := range chaosTenants {
		l.ids[tenant], l.pending[tenant] = map[string]string{}, map[string]bool{}
	}
	return l
}

var chaosCapabilities = []*csi.VolumeCapability{{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}}

// definitive: the answer of a call that need not be retried.
func definitive(code codes.Code) bool {
	switch code {
	case codes.OK, codes.ResourceExhausted, codes.NotFound, codes.AlreadyExists:
		return true
	}
	return false
}

// do makes one call on a replica picked at random and records its answer.
func (l *chaosLoad) do(tenant, method string, call func(ctx context.Context, c csi.ControllerClient) error) codes.Code {
	ctx, cancel := context.WithTimeout(context.Background(), l.deadline)
	defer cancel()
	start := time.Now()
	err := call(ctx, l.r.client(tenant))
	st := status.Convert(err)
	l.mu.Lock()
	l.calls = append(l.calls, chaosCall{method: method, code: st.Code(), message: st.Message(), took: time.Since(start), limit: l.deadline})
	l.mu.Unlock()
	l.done.Add(1)
	return st.Code()
}

func (l *chaosLoad) createVolume(tenant, name string) codes.Code {
	var id string
	code := l.do(tenant, "CreateVolume", func(ctx context.Context, c csi.ControllerClient) error {
		resp, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: chaosCapabilities,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}})
		id = resp.GetVolume().GetVolumeId()
		return err
	})
	if code == codes.OK {
		l.mu.Lock()
		l.ids[tenant][name] = id
		l.mu.Unlock()
	}
	return code
}

func (l *chaosLoad) deleteVolume(tenant, name, id string) codes.Code {
	code := l.do(tenant, "DeleteVolume", func(ctx context.Context, c csi.ControllerClient) error {
		_, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
		return err
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if code == codes.OK {
		delete(l.pending[tenant], id)
		if l.ids[tenant][name] == id {
			delete(l.ids[tenant], name)
		}
	} else {
		l.pending[tenant][id] = true
	}
	return code
}

// snapshotSource is the base volume snap-i is taken of.
func snapshotSource(i int) string { return fmt.Sprintf("base-%d", i%2) }

func (l *chaosLoad) createSnapshot(tenant string, i int) codes.Code {
	l.mu.Lock()
	source := l.ids[tenant][snapshotSource(i)]
	l.mu.Unlock()
	return l.do(tenant, "CreateSnapshot", func(ctx context.Context, c csi.ControllerClient) error {
		_, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: fmt.Sprintf("snap-%d", i), SourceVolumeId: source})
		return err
	})
}

// chaosRetryFor bounds the retries of one name.
const chaosRetryFor = 2 * time.Minute

// until retries call until its answer is definitive, failing the test after chaosRetryFor.
func (l *chaosLoad) until(t *testing.T, what string, call func() codes.Code) codes.Code {
	t.Helper()
	deadline := time.Now().Add(chaosRetryFor)
	for {
		code := call()
		if definitive(code) {
			return code
		}
		if time.Now().After(deadline) {
			l.mu.Lock()
			last := l.calls[len(l.calls)-1]
			l.mu.Unlock()
			t.Fatalf("%s: still %v after %s of retries (the last call's answer: %s %v %q)", what, code, chaosRetryFor, last.method, last.code, last.message)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setUp creates each tenant's base volumes, the sources of its snapshots.
func (l *chaosLoad) setUp(t *testing.T) {
	for _, tenant := range chaosTenants {
		for i := range 2 {
			if code := l.until(t, tenant+" base volume", func() codes.Code { return l.createVolume(tenant, snapshotSource(i)) }); code != codes.OK {
				t.Fatalf("%s's base volume %s: %v", tenant, snapshotSource(i), code)
			}
		}
	}
}

// chaosEvent is something done to the rig once the load has made at calls.
type chaosEvent struct {
	at int64
	do func()
}

// run makes at least total calls with chaosWorkers concurrent workers (half per tenant), on
// names that collide, while events happen one after the other; it returns when both the
// calls and the events are done.
func (l *chaosLoad) run(total int64, events []chaosEvent) {
	var eventsDone atomic.Bool
	go func() {
		defer eventsDone.Store(true) // also when an event fails its test
		for _, e := range events {
			for l.done.Load() < e.at {
				time.Sleep(10 * time.Millisecond)
			}
			e.do()
		}
	}()
	var wg sync.WaitGroup
	for w := range chaosWorkers {
		tenant := chaosTenants[w%len(chaosTenants)]
		wg.Go(func() {
			for l.done.Load() < total || !eventsDone.Load() {
				l.step(tenant)
			}
		})
	}
	wg.Wait()
}

// step is one call of a worker: a create (half), a delete of a volume it knows, or a snapshot.
func (l *chaosLoad) step(tenant string) {
	name := fmt.Sprintf("pvc-%d", rand.IntN(chaosVolumes))
	switch p := rand.Float64(); {
	case p < 0.5:
		l.createVolume(tenant, name)
	case p < 0.8:
		l.mu.Lock()
		id := l.ids[tenant][name]
		l.mu.Unlock()
		if id == "" {
			l.createVolume(tenant, name)
		} else {
			l.deleteVolume(tenant, name, id)
		}
	default:
		l.createSnapshot(tenant, rand.IntN(chaosSnapshots))
	}
}

// retryAll is the orchestrator's retries after the run, each tenant's one after the other
// until definitive: every delete that got no definitive answer, then a create of every name
// (which finds and records what an unanswered create made), then every snapshot. It returns
// how many calls that took.
func (l *chaosLoad) retryAll(t *testing.T) int64 {
	before := l.done.Load()
	var wg sync.WaitGroup
	for _, tenant := range chaosTenants {
		wg.Go(func() {
			l.mu.Lock()
			var pending []string
			for id := range l.pending[tenant] {
				pending = append(pending, id)
			}
			l.mu.Unlock()
			for _, id := range pending {
				l.until(t, tenant+" delete "+id, func() codes.Code { return l.deleteVolume(tenant, "", id) })
			}
			for i := range chaosVolumes {
				name := fmt.Sprintf("pvc-%d", i)
				l.until(t, tenant+" create "+name, func() codes.Code { return l.createVolume(tenant, name) })
			}
			for i := range chaosSnapshots {
				l.until(t, fmt.Sprintf("%s snapshot snap-%d", tenant, i), func() codes.Code { return l.createSnapshot(tenant, i) })
			}
		})
	}
	wg.Wait()
	return l.done.Load() - before
}

// counts are the load's calls by code.
func (l *chaosLoad) counts() map[codes.Code]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[codes.Code]int{}
	for _, c := range l.calls {
		n[c.code]++
	}
	return n
}

// exportLedger reads the replicas' ledger with `csi-gateway ledger export --store config:…`.
func (r *chaosRig) exportLedger(t *testing.T) *tenancy.Dump {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, testutil.Binary(t), "ledger", "export", "--store", "config:"+r.sc.centralConfig)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ledger export: %v\n%s", err, stderr.String())
	}
	dump, err := tenancy.ReadDump(&stdout)
	if err != nil {
		t.Fatalf("reading the ledger's export: %v", err)
	}
	return dump
}

// agreement compares the ledger with the driver: backend objects the ledger does not record,
// and records of objects the backend does not hold.
func (r *chaosRig) agreement(t *testing.T) (unrecorded, phantom []string) {
	t.Helper()
	dump := r.exportLedger(t)
	volumes, snapshots := r.driver.objects()
	recorded := map[string]bool{}
	for _, o := range dump.Objects {
		recorded[o.Kind+" "+o.ID] = true
		held := volumes
		if o.Kind == "snapshot" {
			held = snapshots
		}
		if _, ok := held[o.ID]; !ok {
			phantom = append(phantom, fmt.Sprintf("%s %s of %s", o.Kind, o.ID, o.Tenant))
		}
	}
	for kind, held := range map[string]map[string]string{"volume": volumes, "snapshot": snapshots} {
		for id, name := range held {
			if !recorded[kind+" "+id] {
				unrecorded = append(unrecorded, fmt.Sprintf("%s %s (%s)", kind, id, name))
			}
		}
	}
	slices.Sort(unrecorded)
	slices.Sort(phantom)
	return unrecorded, phantom
}

// visibilityViolations counts what one tenant sees of, or does to, the other's objects: its
// listings must be exactly its own records, and the other's IDs (as the other sees them,
// and with its own prefix on the other's backend IDs) are not found, nor deleted.
func (r *chaosRig) visibilityViolations(t *testing.T) int {
	t.Helper()
	dump := r.exportLedger(t)
	owned := map[string]map[string]bool{} // tenant → IDs as it sees them
	for _, o := range dump.Objects {
		if owned[o.Tenant] == nil {
			owned[o.Tenant] = map[string]bool{}
		}
		owned[o.Tenant][o.Tenant+"."+o.ID] = true
	}
	ctx := callCtx(t)
	violations := 0
	violation := func(format string, args ...any) {
		t.Errorf("cross-tenant visibility: "+format, args...)
		violations++
	}
	for _, tenant := range chaosTenants {
		ctl := r.ctl[tenant][0]
		listed := map[string]bool{}
		vols, err := ctl.ListVolumes(ctx, &csi.ListVolumesRequest{})
		if err != nil {
			t.Fatalf("%s ListVolumes: %v", tenant, err)
		}
		for _, e := range vols.GetEntries() {
			listed[e.GetVolume().GetVolumeId()] = true
		}
		snaps, err := ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
		if err != nil {
			t.Fatalf("%s ListSnapshots: %v", tenant, err)
		}
		for _, e := range snaps.GetEntries() {
			listed[e.GetSnapshot().GetSnapshotId()] = true
		}
		for id := range listed {
			if !owned[tenant][id] {
				violation("%s lists %s, not its own", tenant, id)
			}
		}
		for id := range owned[tenant] {
			if !listed[id] {
				t.Errorf("%s does not list its own %s", tenant, id)
			}
		}
		for _, o := range dump.Objects {
			if o.Tenant == tenant || o.Kind != "volume" {
				continue
			}
			for _, foreign := range []string{o.Tenant + "." + o.ID, tenant + "." + o.ID} {
				if _, err := ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: foreign}); status.Code(err) != codes.NotFound {
					violation("%s's ControllerGetVolume of %s: %v, want NOT_FOUND", tenant, foreign, err)
				}
				if _, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "foreign", SourceVolumeId: foreign}); status.Code(err) != codes.NotFound {
					violation("%s's snapshot of %s: %v, want NOT_FOUND", tenant, foreign, err)
				}
				if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: foreign}); err != nil {
					violation("%s's DeleteVolume of %s: %v, want OK (nothing done)", tenant, foreign, err)
				}
			}
		}
	}
	volumes, _ := r.driver.objects()
	for _, o := range dump.Objects {
		if _, ok := volumes[o.ID]; o.Kind == "volume" && !ok {
			violation("%s's volume %s is gone after the other tenant deleted its ID", o.Tenant, o.ID)
		}
	}
	return violations
}

// concurrentCreates counts the pairs of identical creates (one method, one name) the driver had
// in flight at the same time: what makes duplicates, and what the locks exist to prevent.
func (d *racyDriver) concurrentCreates() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	byObject := map[string][]backendCall{}
	for _, c := range d.calls {
		if c.method != "DeleteVolume" {
			byObject[c.method+" "+c.object] = append(byObject[c.method+" "+c.object], c)
		}
	}
	n := 0
	for _, calls := range byObject {
		slices.SortFunc(calls, func(a, b backendCall) int { return a.start.Compare(b.start) })
		for i := 1; i < len(calls); i++ {
			for j := range i {
				if calls[i].start.Before(calls[j].end) {
					n++
				}
			}
		}
	}
	return n
}

// overshoot is, per tenant, by how many volumes the backend ever held more than the quota.
func (d *racyDriver) overshoot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	over := map[string]int{}
	for tenant, n := range d.maxHeld {
		over[tenant] = max(0, n-chaosQuota)
	}
	return over
}
