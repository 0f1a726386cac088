package tenancy

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// readCounter counts what a tenant's listing reads from the backend: calls, and entries (a
// listing's entries, the one object of a get of ownedListings).
type readCounter struct{ calls, entries atomic.Int64 }

// wrap returns invoke counting into r; with noGet, the get methods of ownedListings
// (ControllerGetVolume, GetSnapshot, ControllerGetVolumeGroup) are answered UNIMPLEMENTED, as
// by a backend that does not advertise them.
func (r *readCounter) wrap(invoke Invoker, noGet bool) Invoker {
	return func(ctx context.Context, method string, req proto.Message) (proto.Message, error) {
		r.calls.Add(1)
		get := slices.ContainsFunc(slices.Collect(maps.Values(ownedListings)), func(o ownedListing) bool { return o.get == method })
		if noGet && get {
			return nil, status.Error(codes.Unimplemented, "backend does not implement "+path.Base(method))
		}
		resp, err := invoke(ctx, method, req)
		if err != nil {
			return resp, err
		}
		if fd := resp.ProtoReflect().Descriptor().Fields().ByName("entries"); fd != nil {
			r.entries.Add(int64(resp.ProtoReflect().Get(fd).List().Len()))
		} else if get {
			r.entries.Add(1)
		}
		return resp, err
	}
}

// listWith pages a tenant's full listing (method, with req's filters and secrets) by max
// through invoke and returns the IDs of its entries and the number of pages, failing on a
// page over max.
func listWith(tb testing.TB, l *Ledger, tenant, method string, req proto.Message, max int32, invoke Invoker) (ids []string, pages int) {
	tb.Helper()
	token := ""
	for {
		page := proto.Clone(req).ProtoReflect()
		fields := page.Descriptor().Fields()
		page.Set(fields.ByName("max_entries"), protoreflect.ValueOfInt32(max))
		page.Set(fields.ByName("starting_token"), protoreflect.ValueOfString(token))
		resp, err := l.Handle(context.Background(), tenant, method, page.Interface(), invoke)
		if err != nil {
			tb.Fatalf("%s's %s by %d: %v", tenant, path.Base(method), max, err)
		}
		pages++
		m := resp.ProtoReflect()
		entries := m.Get(m.Descriptor().Fields().ByName("entries")).List()
		if max > 0 && entries.Len() > int(max) {
			tb.Fatalf("%s's %s by %d: a page of %d entries", tenant, path.Base(method), max, entries.Len())
		}
		for i := range entries.Len() {
			id, _ := ownRef(entries.Get(i).Message(), behaviours[method].lists)
			ids = append(ids, id)
		}
		if token = m.Get(m.Descriptor().Fields().ByName("next_token")).String(); token == "" {
			return ids, pages
		}
		if pages > 10_000 {
			tb.Fatalf("%s's %s by %d: more than 10,000 pages", tenant, path.Base(method), max)
		}
	}
}

// listVolumesWith is listWith of ListVolumes.
func listVolumesWith(tb testing.TB, l *Ledger, tenant string, max int32, invoke Invoker) (ids []string, pages int) {
	tb.Helper()
	return listWith(tb, l, tenant, listVolumes, &csi.ListVolumesRequest{}, max, invoke)
}

// TestListCostsOwnVolumes: a tenant's full listing reads at most twice its own volumes from
// the backend (here exactly once each) while 10 other tenants hold 10 times more each, in
// pages of any size; the backend's listing (a backend without GET_VOLUME) still lists the
// same, reading everyone's.
func TestListCostsOwnVolumes(t *testing.T) {
	w := newWorld(t, nil)
	const own, others = 5, 10
	var blue []string
	for i := range own {
		blue = append(blue, w.createVolume("blue", fmt.Sprintf("pvc-%d", i), mib))
	}
	for o := range others {
		for i := range 10 * own {
			w.createVolume(fmt.Sprintf("other-%d", o), fmt.Sprintf("pvc-%d", i), mib)
		}
	}
	for _, max := range []int32{0, 1, 2, 5, 6} {
		var r readCounter
		got, _ := listVolumesWith(t, w.ledger, "blue", max, r.wrap(invokerOf(w.back, nil), false))
		if !sameSet(got, blue) {
			t.Errorf("blue's listing by %d: %v; want %v", max, got, blue)
		}
		if r.entries.Load() > 2*own {
			t.Errorf("blue's listing by %d read %d backend entries in %d calls; want at most %d (twice its own)", max, r.entries.Load(), r.calls.Load(), 2*own)
		}
	}
	var r readCounter
	got, _ := listVolumesWith(t, w.ledger, "blue", 2, r.wrap(invokerOf(w.back, nil), true))
	if !sameSet(got, blue) {
		t.Errorf("blue's listing from the backend's listing: %v; want %v", got, blue)
	}
	if all := int64(own + others*10*own); r.entries.Load() < all {
		t.Errorf("the backend's listing read %d entries; it has to read all %d", r.entries.Load(), all)
	}
}

// TestListVolumeHealthCostsOwnVolumes: a tenant's ControllerListVolumeHealth lists its own
// ill volumes only (the healthy ones left out, as the spec advises), reading one
// ControllerGetVolumeHealth per own volume while 3 other tenants hold 4 times more, ill ones
// among them; a backend that cannot get a volume's health is listed through its listing.
func TestListVolumeHealthCostsOwnVolumes(t *testing.T) {
	w := newWorld(t, nil)
	const own = 4
	ill := map[string][]string{}
	for _, tenant := range []string{"blue", "other-0", "other-1", "other-2"} {
		n := own
		if tenant != "blue" {
			n = 4 * own
		}
		for i := range n {
			id := w.createVolume(tenant, fmt.Sprintf("pvc-%d", i), mib)
			if i%2 == 0 { // an image that is gone makes a volume ill
				if err := os.Remove(filepath.Join(w.dataDir, "volumes", unscope(t, tenant, id)+".img")); err != nil {
					t.Fatal(err)
				}
				ill[tenant] = append(ill[tenant], id)
			}
		}
	}
	req := &csi.ControllerListVolumeHealthRequest{}
	for _, max := range []int32{0, 1, 2, 3} {
		var r readCounter
		got, _ := listWith(t, w.ledger, "blue", listVolumeHealth, req, max, r.wrap(invokerOf(w.back, nil), false))
		if !sameSet(got, ill["blue"]) {
			t.Errorf("blue's ControllerListVolumeHealth by %d: %v; want %v", max, got, ill["blue"])
		}
		if r.calls.Load() > 2*own || r.entries.Load() > 2*own {
			t.Errorf("blue's ControllerListVolumeHealth by %d: %d backend calls read %d entries; want at most %d (twice its own)", max, r.calls.Load(), r.entries.Load(), 2*own)
		}
	}
	var r readCounter
	if got, _ := listWith(t, w.ledger, "blue", listVolumeHealth, req, 1, r.wrap(invokerOf(w.back, nil), true)); !sameSet(got, ill["blue"]) {
		t.Errorf("blue's ControllerListVolumeHealth from the backend's listing: %v; want %v", got, ill["blue"])
	}
	if all := len(slices.Concat(slices.Collect(maps.Values(ill))...)); r.entries.Load() < int64(all) {
		t.Errorf("the backend's listing read %d entries; it has to read all %d ill volumes", r.entries.Load(), all)
	}
}

// TestListShowsTheBackendsTruth: a volume deleted on the backend behind the gateway's back
// is no longer listed, though the ledger still holds its record, on every page size.
func TestListShowsTheBackendsTruth(t *testing.T) {
	w := newWorld(t, nil)
	var blue []string
	for i := range 4 {
		blue = append(blue, w.createVolume("blue", fmt.Sprintf("pvc-%d", i), mib))
	}
	gone := blue[1]
	if _, err := w.raw(deleteVolume, &csi.DeleteVolumeRequest{VolumeId: unscope(t, "blue", gone)}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := w.ledger.Lookup(t.Context(), Volume, unscope(t, "blue", gone)); !ok {
		t.Fatal("the ledger forgot a volume the gateway did not delete")
	}
	want := slices.DeleteFunc(slices.Clone(blue), func(id string) bool { return id == gone })
	for _, max := range []int32{0, 1, 2, 3} {
		if got := w.listAll("blue", listVolumes, max); !sameSet(got, want) {
			t.Errorf("blue's listing by %d: %v; want %v (without %s)", max, got, want, gone)
		}
	}
}

// TestListOwnedTokens: a page's next_token is sealed for the tenant and the method: another
// tenant, or another listing, handing it in is ABORTED, and it reveals no backend ID.
func TestListOwnedTokens(t *testing.T) {
	w := newWorld(t, nil)
	for i := range 3 {
		w.createVolume("blue", fmt.Sprintf("pvc-%d", i), mib)
		w.createVolume("green", fmt.Sprintf("pvc-%d", i), mib)
	}
	resp := w.must("blue", listVolumes, &csi.ListVolumesRequest{MaxEntries: 1}).(*csi.ListVolumesResponse)
	token := resp.GetNextToken()
	if token == "" {
		t.Fatal("no next_token after 1 of 3 volumes")
	}
	for _, id := range w.backendVolumes() {
		if strings.Contains(token, id) || strings.Contains(token, strings.TrimPrefix(id, "vol-")) {
			t.Errorf("the token %q shows backend ID %s", token, id)
		}
	}
	_, err := w.call("green", listVolumes, &csi.ListVolumesRequest{MaxEntries: 1, StartingToken: token})
	wantCode(t, err, codes.Aborted, "restart the listing")
	_, err = w.call("blue", listSnapshots, &csi.ListSnapshotsRequest{MaxEntries: 1, StartingToken: token})
	wantCode(t, err, codes.Aborted, "restart the listing")
	// Blue's own token goes on from where the page ended.
	next := w.must("blue", listVolumes, &csi.ListVolumesRequest{MaxEntries: 5, StartingToken: token}).(*csi.ListVolumesResponse)
	if len(next.GetEntries()) != 2 || next.GetNextToken() != "" {
		t.Errorf("blue's second page: %d entries, next_token %q; want the other 2 and the end", len(next.GetEntries()), next.GetNextToken())
	}
}

// TestListOwnedLongIDs: IDs too long to seal as a position (a driver's 100-byte IDs sharing
// a long prefix) page one by one without a repeat or a gap, and a page that ended at a volume
// deleted since goes on from the volumes sharing its first bytes.
func TestListOwnedLongIDs(t *testing.T) {
	l := openLedger(t, filepath.Join(t.TempDir(), "tenancy.db"), nil)
	stem := strings.Repeat("0001-0009-rook-ceph-", 4)
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("%s%020d", stem, 5-i)
		if err := l.Record(t.Context(), Volume, id, Record{Tenant: "blue"}); err != nil {
			t.Fatal(err)
		}
		want = append(want, "blue."+id)
	}
	slices.Sort(want)
	getVolume := func(_ context.Context, _ string, req proto.Message) (proto.Message, error) {
		id := req.(*csi.ControllerGetVolumeRequest).GetVolumeId()
		return &csi.ControllerGetVolumeResponse{Volume: &csi.Volume{VolumeId: id}}, nil
	}
	got, pages := listVolumesWith(t, l, "blue", 1, getVolume)
	if !slices.Equal(got, want) || pages != 5 {
		t.Errorf("blue's listing by 1: %d pages of %v; want 5 of %v", pages, got, want)
	}
	first, err := l.Handle(t.Context(), "blue", listVolumes, &csi.ListVolumesRequest{MaxEntries: 2}, getVolume)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Forget(t.Context(), Volume, strings.TrimPrefix(want[1], "blue.")); err != nil {
		t.Fatal(err)
	}
	resp, err := l.Handle(t.Context(), "blue", listVolumes, &csi.ListVolumesRequest{StartingToken: first.(*csi.ListVolumesResponse).GetNextToken()}, getVolume)
	var rest []string
	for _, e := range resp.(*csi.ListVolumesResponse).GetEntries() {
		rest = append(rest, e.GetVolume().GetVolumeId())
	}
	if err != nil || !slices.Equal(rest, []string{want[0], want[2], want[3], want[4]}) {
		t.Errorf("after a page ending at a volume deleted since: %v, %v; want the others from the first sharing its first bytes", rest, err)
	}
}
