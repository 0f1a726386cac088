package tenancy

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestFenceStopsEveryWrite: on a real 3-member etcd, two replicas write records as fast as
// they can while a third party fences the ledger. Every write a replica saw succeed is in the
// export made after the fence (none is missed), and no write lands after it (a second export,
// once the writers have stopped, is the same). While fenced, a create's hold, an operation's
// lock and a record are refused naming the fence (UNAVAILABLE for the calls), reads go on;
// fencing again adds nothing; unfenced, the replicas write again.
func TestFenceStopsEveryWrite(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	ctx := t.Context()
	prefix := "/fence/"
	replicas := []*Ledger{openEtcdLedger(t, cluster, prefix, nil, nil), openEtcdLedger(t, cluster, prefix, nil, nil)}
	admin := openEtcdLedger(t, cluster, prefix, nil, nil).store

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		acked    []string // the records the replicas' writes reported done
		refusals []error
	)
	const maxWrites = 1000
	started := make(chan struct{}, len(replicas))
	for i, l := range replicas {
		wg.Go(func() {
			for n := range maxWrites { // a fence that did not stop them: the second export differs
				id := fmt.Sprintf("vol-%d-%d", i, n)
				err := l.Record(ctx, Volume, id, Record{Tenant: "blue", Name: "blue." + id, Bytes: mib})
				mu.Lock()
				if err != nil {
					refusals = append(refusals, err)
					mu.Unlock()
					return
				}
				acked = append(acked, id)
				mu.Unlock()
				if n == 2 {
					started <- struct{}{}
				}
			}
		})
	}
	for range replicas {
		<-started // both replicas are writing
	}
	fenced, added, err := Fence(ctx, admin, "a test's migration")
	if err != nil || !fenced || !added {
		t.Fatalf("fence: %v, %v, %v; want a fence added", fenced, added, err)
	}
	first, err := Export(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range refusals {
		if !strings.Contains(err.Error(), "fenced (a test's migration, since ") {
			t.Errorf("a replica's write after the fence: %v; want the fence named", err)
		}
	}
	exported := map[string]bool{}
	for _, o := range first.Objects {
		exported[o.ID] = true
	}
	for _, id := range acked {
		if !exported[id] {
			t.Errorf("the write of %s succeeded, but the export made after the fence misses it", id)
		}
	}
	if again, err := Export(ctx, admin); err != nil || again.Checksum() != first.Checksum() {
		t.Errorf("an export once the writers stopped differs from the one made at the fence (%v): a write landed after the fence", err)
	}
	t.Logf("%d records written before the fence, all exported", len(acked))

	l := replicas[0]
	_, err = l.reserve(ctx, "blue", 1, mib, "blue.pvc-new")
	wantCode(t, err, codes.Unavailable, "fenced", "ledger unfence")
	opCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, _, err = l.LockOperation(opCtx, Operation{Object: "blue/volume:pvc-new", Method: "CreateVolume", Identity: "x", Deadline: time.Now().Add(time.Minute)})
	wantCode(t, err, codes.Unavailable, "fenced")
	if err := l.Forget(ctx, Volume, acked[0]); err == nil || !strings.Contains(err.Error(), "fenced") {
		t.Errorf("forget while fenced: %v; want refused naming the fence", err)
	}
	if _, ok, err := l.Lookup(ctx, Volume, acked[0]); !ok || err != nil {
		t.Errorf("a read while fenced: %v, %v; want the record", ok, err)
	}
	if fenced, added, err := Fence(ctx, admin, "again"); err != nil || !fenced || added {
		t.Errorf("fencing a fenced ledger: %v, %v, %v; want fenced, nothing added", fenced, added, err)
	}

	if removed, err := Unfence(ctx, admin); err != nil || !removed {
		t.Fatalf("unfence: %v, %v", removed, err)
	}
	if removed, err := Unfence(ctx, admin); err != nil || removed {
		t.Errorf("unfencing again: %v, %v; want nothing removed", removed, err)
	}
	if err := l.Record(ctx, Volume, "vol-after", Record{Tenant: "blue", Name: "blue.vol-after"}); err != nil {
		t.Errorf("a write once unfenced: %v", err)
	}
	res, err := l.reserve(ctx, "blue", 1, mib, "blue.pvc-new")
	if err != nil {
		t.Fatalf("a hold once unfenced: %v", err)
	}
	res.release()
}

// TestFenceBboltNeedsNone: a bbolt store is not fenced (its file is one process's).
func TestFenceBboltNeedsNone(t *testing.T) {
	l := openLedger(t, filepath.Join(t.TempDir(), "tenancy.db"), nil)
	if fenced, added, err := Fence(t.Context(), l.store, "x"); fenced || added || err != nil {
		t.Errorf("Fence of a bbolt store: %v, %v, %v; want nothing done", fenced, added, err)
	}
	if removed, err := Unfence(t.Context(), l.store); removed || err != nil {
		t.Errorf("Unfence of a bbolt store: %v, %v; want nothing done", removed, err)
	}
}
