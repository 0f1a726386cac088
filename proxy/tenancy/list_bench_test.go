package tenancy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkTenantListing measures one tenant's full ListVolumes on the reference appliance
// holding 100 tenants × 1,000 volumes, made in turn (so each tenant's are spread over the
// whole listing), and reports the backend calls and entries it reads: served from the
// ledger's index (one ControllerGetVolume per own volume) and, as before, from the backend's
// listing (the path of a backend without GET_VOLUME), in one page (max_entries 0) and in
// pages of 500.
//
// Creating 100,000 volumes through the gateway would take most of an hour (the appliance
// rewrites its state file on each create, the ledger syncs each record), so the appliance's
// state file and the ledger's records are written directly, once, before the appliance and
// the ledger are opened; the ledger builds its per-tenant index from the records when it
// opens the file, as for a ledger written before the index existed.
//
//	go test -run '^$' -bench TenantListing -benchtime 3x ./proxy/tenancy/
func BenchmarkTenantListing(b *testing.B) {
	const tenants, each = 100, 1000
	dataDir, ledgerPath := b.TempDir(), filepath.Join(b.TempDir(), "tenancy.db")
	writeListingState(b, dataDir, ledgerPath, tenants, each)
	back := openAppliance(b, dataDir)
	l, err := Open(ledgerPath, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	tenant := "tenant-042"
	for _, path := range []struct {
		name        string
		noGetVolume bool
	}{{"ledger-index", false}, {"backend-listing", true}} {
		for _, max := range []int32{0, 500} {
			b.Run(fmt.Sprintf("%s/max_entries=%d", path.name, max), func(b *testing.B) {
				var r readCounter
				ops := 0
				for b.Loop() {
					ids, _ := listVolumesWith(b, l, tenant, max, r.wrap(invokerOf(back, nil), path.noGetVolume))
					if len(ids) != each {
						b.Fatalf("%s listed %d volumes; want %d", tenant, len(ids), each)
					}
					ops++
				}
				b.ReportMetric(float64(r.entries.Load())/float64(ops), "backend-entries/op")
				b.ReportMetric(float64(r.calls.Load())/float64(ops), "backend-calls/op")
			})
		}
	}
}

// writeListingState writes the appliance's state file in dataDir and the ledger at
// ledgerPath: tenants × each volumes of 1 MiB, tenant-NNN.pvc-I, made in turn.
func writeListingState(tb testing.TB, dataDir, ledgerPath string, tenants, each int) {
	tb.Helper()
	type vol struct {
		ID            string    `json:"id"`
		Name          string    `json:"name"`
		Seq           int64     `json:"seq"`
		CapacityBytes int64     `json:"capacityBytes"`
		CreatedAt     time.Time `json:"createdAt"`
	}
	volumes := map[string]vol{}
	db, err := bolt.Open(ledgerPath, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		objects, err := tx.CreateBucket(objectsBucket)
		if err != nil {
			return err
		}
		names, err := tx.CreateBucket(namesBucket)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		for i := range each {
			for t := range tenants {
				tenant := fmt.Sprintf("tenant-%03d", t)
				v := vol{ID: fmt.Sprintf("vol-%016x", len(volumes)*7919), Name: fmt.Sprintf("%s.pvc-%d", tenant, i),
					Seq: int64(len(volumes) + 1), CapacityBytes: mib, CreatedAt: now}
				volumes[v.ID] = v
				r, _ := json.Marshal(Record{Tenant: tenant, Name: v.Name, Bytes: mib})
				if err := objects.Put(boltKey(Volume, v.ID), r); err != nil {
					return err
				}
				if err := names.Put(boltKey(Volume, v.Name), []byte(v.ID)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	state, err := json.Marshal(map[string]any{"seq": len(volumes), "volumes": volumes})
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "state.json"), state, 0o600); err != nil {
		tb.Fatal(err)
	}
}
