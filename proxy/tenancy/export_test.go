package tenancy

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// syntheticDump is n objects of three tenants, of every kind, some named, volumes with bytes.
func syntheticDump(n int) *Dump {
	objects := make([]DumpObject, n)
	for i := range objects {
		o := DumpObject{Kind: dumpKinds[i%len(dumpKinds)].name, ID: fmt.Sprintf("id-%05d", i), Tenant: []string{"blue", "green", "red"}[i%3]}
		if i%2 == 0 {
			o.Name = fmt.Sprintf("pvc-%05d", i)
		}
		if i%10 == 0 {
			o.Asked = fmt.Sprintf("long-pvc-%05d", i) // as the name a tenant gave, too long to show in Name
		}
		if o.Kind == "volume" {
			o.Bytes = int64(i) << 20
		}
		objects[i] = o
	}
	return newDump(objects)
}

func encode(t *testing.T, d *Dump) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := d.Encode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestLedgerMigrateRoundTrip: a 10,000-entry ledger imported into bbolt, copied to a real
// 3-member etcd and back into a new bbolt file exports the same bytes (and checksum) at
// every step, and each store's usage is the one its records count.
func TestLedgerMigrateRoundTrip(t *testing.T) {
	want := syntheticDump(10_000)
	first := openLedger(t, filepath.Join(t.TempDir(), "first.db"), nil).store
	if err := Import(t.Context(), first, want, false); err != nil {
		t.Fatal(err)
	}
	cluster := testutil.StartEtcd(t, 3)
	stores := []Store{first, openEtcdLedger(t, cluster, "/migrate/", nil, nil).store, openLedger(t, filepath.Join(t.TempDir(), "back.db"), nil).store}
	wantBytes := encode(t, want)
	for i, s := range stores {
		if i > 0 {
			start := time.Now()
			d, err := Export(t.Context(), stores[i-1])
			if err != nil {
				t.Fatal(err)
			}
			exported := time.Since(start)
			if err := Import(t.Context(), s, d, false); err != nil {
				t.Fatalf("store %d: %v", i, err)
			}
			t.Logf("store %d from store %d: export %s, import %s", i, i-1, exported.Round(time.Millisecond), (time.Since(start) - exported).Round(time.Millisecond))
		}
		got, err := Export(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encode(t, got), wantBytes) || got.Checksum() != want.Checksum() {
			t.Fatalf("store %d exports %d objects, checksum %s; want the %d imported, %s", i, len(got.Objects), got.Checksum(), len(want.Objects), want.Checksum())
		}
		for _, ts := range want.Tenants {
			u, err := s.usage(t.Context(), ts.Tenant)
			if err != nil || u != (usage{ts.Objects["volume"], ts.VolumeBytes}) {
				t.Errorf("store %d: %s's usage %+v, %v; want %d volumes, %d bytes", i, ts.Tenant, u, err, ts.Objects["volume"], ts.VolumeBytes)
			}
		}
	}
}

// TestLedgerImport: an import refuses a store with records unless merging, and importing
// the same dump twice (merging) leaves the same records and usage.
func TestLedgerImport(t *testing.T) {
	d := syntheticDump(40)
	store := openLedger(t, filepath.Join(t.TempDir(), "tenancy.db"), nil).store
	if err := Import(t.Context(), store, d, false); err != nil {
		t.Fatal(err)
	}
	if err := Import(t.Context(), store, d, false); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second import without merge: %v; want %v", err, ErrNotEmpty)
	}
	before, _ := store.usages(t.Context())
	if err := Import(t.Context(), store, d, true); err != nil {
		t.Fatalf("second import, merging: %v", err)
	}
	after, _ := store.usages(t.Context())
	got, err := Export(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checksum() != d.Checksum() || fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("after importing twice: checksum %s, usage %v; want %s, %v", got.Checksum(), after, d.Checksum(), before)
	}
	// Another tenant's object of the same ID is refused, merging or not.
	other := newDump([]DumpObject{{Kind: "volume", ID: d.Objects[0].ID, Tenant: "yellow"}})
	if err := Import(t.Context(), store, other, true); !errors.Is(err, errOwnedElsewhere) {
		t.Errorf("merging another tenant's record of %s: %v; want %v", d.Objects[0].ID, err, errOwnedElsewhere)
	}
}

// TestReadDumpRefuses: a file that is not a whole, consistent export is refused.
func TestReadDumpRefuses(t *testing.T) {
	good := string(encode(t, syntheticDump(8)))
	for name, text := range map[string]string{
		"truncated":      good[:len(good)/2],
		"object dropped": strings.Replace(good, "\n    {\"kind\":\"volume\",\"id\":\"id-00004\",\"tenant\":\"green\",\"name\":\"pvc-00004\",\"bytes\":4194304},", "", 1),
		"count edited":   strings.Replace(good, "\"volumeBytes\":0", "\"volumeBytes\":1", 1),
		"other format":   strings.Replace(good, DumpFormat, "csi-gateway-ledger/9", 1),
		"duplicate id":   strings.Replace(good, "\"id\":\"id-00001\"", "\"id\":\"id-00005\"", 1),
		"unknown kind":   strings.Replace(good, "\"kind\":\"snapshot\"", "\"kind\":\"disk\"", 1),
		"unknown field":  strings.Replace(good, "\"format\"", "\"extra\": 1, \"format\"", 1),
		"bad tenant":     strings.Replace(good, "\"tenant\":\"red\"", "\"tenant\":\"re/d\"", -1),
	} {
		if _, err := ReadDump(strings.NewReader(text)); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	if d, err := ReadDump(strings.NewReader(good)); err != nil || string(encode(t, d)) != good {
		t.Errorf("the export itself: %v", err)
	}
}
