package tenancy

import (
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// testOwnedIndex: the index of a tenant's records lists that tenant's objects of one kind
// only, in ID order, pages from a position, follows records and forgets, and survives a
// reopen (another replica).
func testOwnedIndex(t *testing.T, open opener) {
	l := open(t, nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"vol-c", "vol-a", "vol-e", "vol-b", "vol-d"} {
		must(l.Record(t.Context(), Volume, id, Record{Tenant: "blue", Name: "blue." + id, Bytes: mib}))
	}
	// Another tenant whose name starts like blue's, and blue's other kinds, are not listed.
	must(l.Record(t.Context(), Volume, "vol-aa", Record{Tenant: "blue-2", Name: "blue-2.x", Bytes: mib}))
	must(l.Record(t.Context(), Volume, "vol-ab", Record{Tenant: "green", Name: "green.x", Bytes: mib}))
	must(l.Record(t.Context(), Snapshot, "snap-a", Record{Tenant: "blue", Name: "blue.snap"}))
	// A new size keeps the volume listed once.
	must(l.Record(t.Context(), Volume, "vol-b", Record{Tenant: "blue", Bytes: 2 * mib}))
	must(l.Forget(t.Context(), Volume, "vol-d"))
	must(l.Close())

	l = open(t, nil)
	for _, tc := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 0, []string{"vol-a", "vol-b", "vol-c", "vol-e"}},
		{"", 2, []string{"vol-a", "vol-b"}},
		{"vol-b", 2, []string{"vol-c", "vol-e"}},
		{"vol-bb", 0, []string{"vol-c", "vol-e"}}, // a position that is no longer (or never was) an ID
		{"vol-e", 0, nil},
	} {
		got, err := l.store.owned(t.Context(), "blue", Volume, tc.after, tc.limit)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("owned(blue, after %q, limit %d) = %q, %v; want %q", tc.after, tc.limit, got, err, tc.want)
		}
	}
	if got, _ := l.store.owned(t.Context(), "blue", Snapshot, "", 0); !slices.Equal(got, []string{"snap-a"}) {
		t.Errorf("blue's snapshots: %q", got)
	}
	if got, _ := l.store.owned(t.Context(), "red", Volume, "", 0); len(got) != 0 {
		t.Errorf("red, who owns nothing, owns %q", got)
	}
}

// TestBoltIndexesAnOldFile: a ledger file written before the index existed is indexed from
// its records when it is opened.
func TestBoltIndexesAnOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenancy.db")
	l := openLedger(t, path, nil)
	for _, id := range []string{"vol-2", "vol-1"} {
		if err := l.Record(t.Context(), Volume, id, Record{Tenant: "blue", Name: "blue." + id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.store.(*boltStore).db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(ownedBucket) }); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLedger(t, path, nil)
	if got, err := l.store.owned(t.Context(), "blue", Volume, "", 0); err != nil || !slices.Equal(got, []string{"vol-1", "vol-2"}) {
		t.Errorf("blue's volumes after indexing the old file: %q, %v", got, err)
	}
}
