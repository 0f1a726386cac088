package tenancy

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
)

// openLedger opens a ledger at path, closed when the test ends (Close twice is harmless).
func openLedger(t *testing.T, path string, quotas map[string]Quota) *Ledger {
	t.Helper()
	l, err := Open(path, quotas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func testLedgerSurvivesReopen(t *testing.T, open opener) {
	l := open(t, nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Record(t.Context(), Volume, "vol-1", Record{Tenant: "blue", Name: "blue.pvc-1", Bytes: 10 * mib}))
	must(l.Record(t.Context(), Volume, "vol-2", Record{Tenant: "blue", Name: "blue.pvc-2", Bytes: 5 * mib}))
	must(l.Record(t.Context(), Volume, "vol-3", Record{Tenant: "green", Name: "green.pvc-1", Bytes: 7 * mib}))
	must(l.Record(t.Context(), Snapshot, "snap-1", Record{Tenant: "blue", Name: "blue.snap-1"}))
	must(l.Record(t.Context(), GroupSnapshot, "gs-1", Record{Tenant: "green", Name: "green.gs-1"}))
	must(l.Record(t.Context(), VolumeGroup, "vg-1", Record{Tenant: "blue", Name: "blue.vg-1"}))
	// A volume's new size (an expansion) keeps its name.
	must(l.Record(t.Context(), Volume, "vol-2", Record{Tenant: "blue", Bytes: 8 * mib}))
	must(l.Close())

	l = open(t, nil)
	for _, tc := range []struct {
		kind Kind
		id   string
		want Record
	}{
		{Volume, "vol-1", Record{Tenant: "blue", Name: "blue.pvc-1", Bytes: 10 * mib}},
		{Volume, "vol-2", Record{Tenant: "blue", Name: "blue.pvc-2", Bytes: 8 * mib}},
		{Volume, "vol-3", Record{Tenant: "green", Name: "green.pvc-1", Bytes: 7 * mib}},
		{Snapshot, "snap-1", Record{Tenant: "blue", Name: "blue.snap-1"}},
		{GroupSnapshot, "gs-1", Record{Tenant: "green", Name: "green.gs-1"}},
		{VolumeGroup, "vg-1", Record{Tenant: "blue", Name: "blue.vg-1"}},
	} {
		got, ok, err := l.Lookup(t.Context(), tc.kind, tc.id)
		if err != nil || !ok || got != tc.want {
			t.Errorf("Lookup(%v, %s) after reopening = %+v, %t, %v; want %+v", tc.kind, tc.id, got, ok, err, tc.want)
		}
		id, ok, err := l.ByName(t.Context(), tc.kind, tc.want.Name)
		if err != nil || !ok || id != tc.id {
			t.Errorf("ByName(%v, %s) after reopening = %q, %t, %v; want %s", tc.kind, tc.want.Name, id, ok, err, tc.id)
		}
	}
	// Kinds do not share IDs or names.
	if _, ok, _ := l.Lookup(t.Context(), Snapshot, "vol-1"); ok {
		t.Error("a volume's ID is known as a snapshot's")
	}
	if _, ok, _ := l.ByName(t.Context(), Snapshot, "blue.pvc-1"); ok {
		t.Error("a volume's name is known as a snapshot's")
	}
	// Usage is rebuilt from the volumes' records.
	if u := l.usageNow("blue"); u != (usage{volumes: 2, bytes: 18 * mib}) {
		t.Errorf("blue's usage after reopening = %+v; want 2 volumes, 18 MiB", u)
	}
	if u := l.usageNow("green"); u != (usage{volumes: 1, bytes: 7 * mib}) {
		t.Errorf("green's usage after reopening = %+v; want 1 volume, 7 MiB", u)
	}
}

func testLedgerQuotaSurvivesReopen(t *testing.T, open opener) {
	quotas := map[string]Quota{"blue": {MaxVolumes: 2, MaxBytes: 20 * mib}}
	l := open(t, quotas)
	if err := l.Record(t.Context(), Volume, "vol-1", Record{Tenant: "blue", Name: "blue.a", Bytes: 15 * mib}); err != nil {
		t.Fatal(err)
	}
	l.Close()

	l = open(t, quotas)
	_, err := l.reserve(t.Context(), "blue", 1, 6*mib, "")
	wantCode(t, err, codes.ResourceExhausted, "maxBytes", "15728640")
	release, err := l.reserve(t.Context(), "blue", 1, 5*mib, "")
	if err != nil {
		t.Fatalf("reserving what the quota has left after reopening: %v", err)
	}
	_, err = l.reserve(t.Context(), "blue", 1, 0, "")
	wantCode(t, err, codes.ResourceExhausted, "maxVolumes", "2 volumes")
	release.release()
}

func testLedgerRecordRefusesAnotherTenantsObject(t *testing.T, open opener) {
	l := open(t, nil)
	if err := l.Record(t.Context(), Volume, "vol-1", Record{Tenant: "green", Name: "green.pvc", Bytes: mib}); err != nil {
		t.Fatal(err)
	}
	err := l.Record(t.Context(), Volume, "vol-1", Record{Tenant: "blue", Name: "blue.pvc", Bytes: 9 * mib})
	if !errors.Is(err, errOwnedElsewhere) {
		t.Fatalf("Record of green's volume for blue: %v; want errOwnedElsewhere", err)
	}
	// Nothing changed: owner, name index, usage.
	if r, ok, _ := l.Lookup(t.Context(), Volume, "vol-1"); !ok || r != (Record{Tenant: "green", Name: "green.pvc", Bytes: mib}) {
		t.Errorf("after the refusal the record is %+v, %t", r, ok)
	}
	if _, ok, _ := l.ByName(t.Context(), Volume, "blue.pvc"); ok {
		t.Error("the refused name was indexed")
	}
	if u := l.usageNow("blue"); u != (usage{}) {
		t.Errorf("blue's usage after the refusal = %+v", u)
	}
	if u := l.usageNow("green"); u != (usage{volumes: 1, bytes: mib}) {
		t.Errorf("green's usage after the refusal = %+v", u)
	}
	// A retry by the owner is fine and does not count twice.
	if err := l.Record(t.Context(), Volume, "vol-1", Record{Tenant: "green", Name: "green.pvc", Bytes: mib}); err != nil {
		t.Fatal(err)
	}
	if u := l.usageNow("green"); u != (usage{volumes: 1, bytes: mib}) {
		t.Errorf("green's usage after recording the same volume twice = %+v", u)
	}
}

func testLedgerForget(t *testing.T, open opener) {
	quotas := map[string]Quota{"blue": {MaxVolumes: 1, MaxBytes: 4 * mib}}
	l := open(t, quotas)
	if err := l.Record(t.Context(), Volume, "vol-1", Record{Tenant: "blue", Name: "blue.pvc", Bytes: 4 * mib}); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(t.Context(), Snapshot, "snap-1", Record{Tenant: "blue", Name: "blue.pvc"}); err != nil {
		t.Fatal(err) // the same name, another kind
	}
	if _, err := l.reserve(t.Context(), "blue", 1, mib, ""); err == nil {
		t.Fatal("the quota is full, yet a reservation succeeded")
	}
	if err := l.Forget(t.Context(), Volume, "vol-1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.Lookup(t.Context(), Volume, "vol-1"); ok {
		t.Error("Lookup finds a forgotten volume")
	}
	if id, ok, _ := l.ByName(t.Context(), Volume, "blue.pvc"); ok {
		t.Errorf("ByName finds a forgotten volume's name (%s)", id)
	}
	if id, ok, _ := l.ByName(t.Context(), Snapshot, "blue.pvc"); !ok || id != "snap-1" {
		t.Errorf("forgetting a volume forgot the snapshot of the same name: %q, %t", id, ok)
	}
	if u := l.usageNow("blue"); u != (usage{}) {
		t.Errorf("blue's usage after the volume is forgotten = %+v", u)
	}
	release, err := l.reserve(t.Context(), "blue", 1, 4*mib, "")
	if err != nil {
		t.Fatalf("the quota is free again, yet: %v", err)
	}
	release.release()
	// Forgetting what is not there is a no-op, and changes no usage.
	if err := l.Forget(t.Context(), Volume, "vol-1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Forget(t.Context(), VolumeGroup, "never"); err != nil {
		t.Fatal(err)
	}
	if u := l.usageNow("blue"); u != (usage{}) {
		t.Errorf("blue's usage after forgetting twice = %+v", u)
	}
	// And it lasts.
	l.Close()
	l = open(t, quotas)
	if _, ok, _ := l.Lookup(t.Context(), Volume, "vol-1"); ok {
		t.Error("a forgotten volume came back after reopening")
	}
	if _, ok, _ := l.ByName(t.Context(), Volume, "blue.pvc"); ok {
		t.Error("a forgotten name came back after reopening")
	}
	if u := l.usageNow("blue"); u != (usage{}) {
		t.Errorf("blue's usage after reopening = %+v", u)
	}
}

func TestLedgerOpenTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenancy.db")
	openLedger(t, path, nil)
	second, err := Open(path, nil) // waits for the lock for 2 s
	if err == nil {
		second.Close()
		t.Fatal("a second Open of a ledger in use succeeded")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("a second Open fails with %q: it should name the file and say it is in use", err)
	}
}

func TestLedgerOpenFailures(t *testing.T) {
	// A directory that does not exist.
	if l, err := Open(filepath.Join(t.TempDir(), "missing", "tenancy.db"), nil); err == nil {
		l.Close()
		t.Error("Open in a missing directory succeeded")
	}
}

func testReserveRelease(t *testing.T, open opener) {
	l := open(t, map[string]Quota{
		"blue":  {MaxVolumes: 2, MaxBytes: 10 * mib},
		"green": {MaxBytes: 3 * mib},
	})
	r1, err := l.reserve(t.Context(), "blue", 1, 6*mib, "")
	if err != nil {
		t.Fatal(err)
	}
	// 6 + 5 > 10.
	_, err = l.reserve(t.Context(), "blue", 1, 5*mib, "")
	wantCode(t, err, codes.ResourceExhausted, "tenant blue", "maxBytes quota of 10485760", "6291456 bytes")
	r2, err := l.reserve(t.Context(), "blue", 1, 4*mib, "") // exactly 10
	if err != nil {
		t.Fatal(err)
	}
	// Two volumes held: a third is refused, an expansion (no volume) of 0 bytes is not.
	_, err = l.reserve(t.Context(), "blue", 1, 0, "")
	wantCode(t, err, codes.ResourceExhausted, "maxVolumes", "may hold 2")
	r3, err := l.reserve(t.Context(), "blue", 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	r3.release()
	if u := l.usageNow("blue"); u != (usage{volumes: 2, bytes: 10 * mib}) {
		t.Errorf("usage with two reservations = %+v", u)
	}
	// A release gives back once, however often it is called.
	r1.release()
	r1.release()
	if u := l.usageNow("blue"); u != (usage{volumes: 1, bytes: 4 * mib}) {
		t.Errorf("usage after releasing the first = %+v", u)
	}
	r2.release()
	if u := l.usageNow("blue"); u != (usage{}) {
		t.Errorf("usage after releasing both = %+v", u)
	}
	// Tenants do not share quotas; zero fields are unlimited; tenants without a quota have none.
	for range 10 {
		if _, err := l.reserve(t.Context(), "green", 1, 0, ""); err != nil {
			t.Fatalf("green has no volume limit: %v", err)
		}
	}
	if _, err := l.reserve(t.Context(), "green", 0, 3*mib+1, ""); err == nil {
		t.Error("green's byte quota was not enforced")
	}
	if _, err := l.reserve(t.Context(), "red", 1000, 1<<50, ""); err != nil {
		t.Errorf("a tenant without a quota: %v", err)
	}
	// bytesLeft follows reservations and has nothing to say without a byte quota.
	if left, ok, err := l.bytesLeft(t.Context(), "blue"); err != nil || !ok || left != 10*mib {
		t.Errorf("bytesLeft(blue) = %d, %t, %v", left, ok, err)
	}
	if _, ok, _ := l.bytesLeft(t.Context(), "red"); ok {
		t.Error("bytesLeft of a tenant without a byte quota says it has one")
	}
}

func testReserveConcurrent(t *testing.T, open opener) {
	l := open(t, map[string]Quota{
		"blue": {MaxVolumes: 5, MaxBytes: 100 * mib},
	})
	const n = 20
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		releases []*reservation
		refused  int
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			release, err := l.reserve(t.Context(), "blue", 1, mib, "")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			releases = append(releases, release)
		})
	}
	close(start)
	wg.Wait()
	if len(releases) != 5 || refused != n-5 {
		t.Fatalf("%d of %d concurrent reservations against maxVolumes 5 succeeded (%d refused)", len(releases), n, refused)
	}
	if u := l.usageNow("blue"); u != (usage{volumes: 5, bytes: 5 * mib}) {
		t.Errorf("usage = %+v", u)
	}
	// Bytes too: with 5 volumes' room freed, 20 reservations of 30 MiB fit 3 times in 100 MiB.
	for _, r := range releases {
		r.release()
	}
	releases, refused = nil, 0
	for range n {
		wg.Go(func() {
			<-start // closed: no wait
			release, err := l.reserve(t.Context(), "blue", 0, 30*mib, "")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			releases = append(releases, release)
		})
	}
	wg.Wait()
	if len(releases) != 3 {
		t.Fatalf("%d of %d concurrent 30 MiB reservations against maxBytes 100 MiB succeeded", len(releases), n)
	}
	for _, r := range releases {
		r.release()
	}
	if u := l.usageNow("blue"); u != (usage{}) {
		t.Errorf("usage after releasing everything = %+v", u)
	}
}
