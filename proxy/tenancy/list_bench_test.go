package tenancy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// BenchmarkTenantListing measures one tenant's full listing on the reference appliance
// holding 100 tenants × 1,000 volumes and 100 tenants × 1,000 snapshots (one of each of the
// tenant's volumes), made in turn (so each tenant's are spread over the whole listing), and
// reports the backend calls and entries it reads: ListVolumes and ListSnapshots, served from
// the ledger's index (one ControllerGetVolume or GetSnapshot per own object) and, as before,
// from the backend's listing (the path of a backend without GET_VOLUME or GET_SNAPSHOT), in
// one page (max_entries 0) and in pages of 500.
//
// Creating 200,000 objects through the gateway would take hours (the appliance rewrites its
// state file on each create, the ledger syncs each record), so the appliance's state file and
// the ledger's records are written directly, once, before the appliance and the ledger are
// opened; the ledger builds its per-tenant index from the records when it opens the file, as
// for a ledger written before the index existed.
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
	for _, kind := range []struct {
		name string
		list string
		req  proto.Message
	}{{"volumes", listVolumes, &csi.ListVolumesRequest{}}, {"snapshots", listSnapshots, &csi.ListSnapshotsRequest{}}} {
		for _, path := range []struct {
			name  string
			noGet bool
		}{{"ledger-index", false}, {"backend-listing", true}} {
			for _, max := range []int32{0, 500} {
				b.Run(fmt.Sprintf("%s/%s/max_entries=%d", kind.name, path.name, max), func(b *testing.B) {
					var r readCounter
					ops := 0
					for b.Loop() {
						ids, _ := listWith(b, l, tenant, kind.list, kind.req, max, r.wrap(invokerOf(back, nil), path.noGet))
						if len(ids) != each {
							b.Fatalf("%s listed %d %s; want %d", tenant, len(ids), kind.name, each)
						}
						ops++
					}
					b.ReportMetric(float64(r.entries.Load())/float64(ops), "backend-entries/op")
					b.ReportMetric(float64(r.calls.Load())/float64(ops), "backend-calls/op")
				})
			}
		}
	}
}

// writeListingState writes the appliance's state file in dataDir and the ledger at
// ledgerPath: tenants × each volumes of 1 MiB, tenant-NNN.pvc-I, made in turn, and a snapshot
// of each, tenant-NNN.snap-I.
func writeListingState(tb testing.TB, dataDir, ledgerPath string, tenants, each int) {
	tb.Helper()
	type vol struct {
		ID            string    `json:"id"`
		Name          string    `json:"name"`
		Seq           int64     `json:"seq"`
		CapacityBytes int64     `json:"capacityBytes"`
		CreatedAt     time.Time `json:"createdAt"`
	}
	type snap struct {
		ID             string    `json:"id"`
		Name           string    `json:"name"`
		Seq            int64     `json:"seq"`
		SourceVolumeID string    `json:"sourceVolumeId"`
		SizeBytes      int64     `json:"sizeBytes"`
		CreatedAt      time.Time `json:"createdAt"`
	}
	volumes, snapshots := map[string]vol{}, map[string]snap{}
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
		record := func(kind Kind, id, tenant, name string, bytes int64) error {
			r, _ := json.Marshal(Record{Tenant: tenant, Name: name, Bytes: bytes})
			if err := objects.Put(boltKey(kind, id), r); err != nil {
				return err
			}
			return names.Put(boltKey(kind, name), []byte(id))
		}
		now := time.Now().UTC()
		seq := int64(0)
		for i := range each {
			for t := range tenants {
				tenant := fmt.Sprintf("tenant-%03d", t)
				seq++
				v := vol{ID: fmt.Sprintf("vol-%016x", len(volumes)*7919), Name: fmt.Sprintf("%s.pvc-%d", tenant, i),
					Seq: seq, CapacityBytes: mib, CreatedAt: now}
				volumes[v.ID] = v
				if err := record(Volume, v.ID, tenant, v.Name, mib); err != nil {
					return err
				}
				seq++
				s := snap{ID: fmt.Sprintf("snap-%016x", len(snapshots)*7919), Name: fmt.Sprintf("%s.snap-%d", tenant, i),
					Seq: seq, SourceVolumeID: v.ID, SizeBytes: mib, CreatedAt: now}
				snapshots[s.ID] = s
				if err := record(Snapshot, s.ID, tenant, s.Name, 0); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	state, err := json.Marshal(map[string]any{"seq": len(volumes) + len(snapshots), "volumes": volumes, "snapshots": snapshots})
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "state.json"), state, 0o600); err != nil {
		tb.Fatal(err)
	}
}
