package tenancy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// canarySecrets are a listing's secrets: passed on to each GetSnapshot, never shown.
var canarySecrets = map[string]string{"password": "CANARY-list-snapshots-secret-41b9"}

// snapshotWorld is blue's snapshots (3 on each of 2 volumes) among 3 other tenants' 12 each.
type snapshotWorld struct {
	*world
	volumes []string            // blue's
	snaps   map[string][]string // blue's by volume
	all     []string            // blue's
	others  int
}

func newSnapshotWorld(t *testing.T, w *world) *snapshotWorld {
	t.Helper()
	s := &snapshotWorld{world: w, snaps: map[string][]string{}}
	for v := range 2 {
		vol := w.createVolume("blue", fmt.Sprintf("pvc-%d", v), mib)
		s.volumes = append(s.volumes, vol)
		for i := range 3 {
			id := w.createSnapshot("blue", fmt.Sprintf("snap-%d-%d", v, i), vol)
			s.snaps[vol] = append(s.snaps[vol], id)
			s.all = append(s.all, id)
		}
	}
	for o := range 3 {
		tenant := fmt.Sprintf("other-%d", o)
		vol := w.createVolume(tenant, "pvc", mib)
		for i := range 12 {
			w.createSnapshot(tenant, fmt.Sprintf("snap-%d", i), vol)
			s.others++
		}
	}
	return s
}

// secretsChecked returns invoke checking that every GetSnapshot carries the listing's
// secrets; missing counts those that do not.
func secretsChecked(invoke Invoker, missing *atomic.Int64) Invoker {
	return func(ctx context.Context, method string, req proto.Message) (proto.Message, error) {
		if g, ok := req.(*csi.GetSnapshotRequest); ok && !maps.Equal(g.GetSecrets(), canarySecrets) {
			missing.Add(1)
		}
		return invoke(ctx, method, req)
	}
}

// TestListSnapshotsCostsOwnSnapshots: on each backend, a tenant's full ListSnapshots, in
// pages of any size, shows its own snapshots and no other tenant's, and reads at most twice
// its own from the backend (here one GetSnapshot each, carrying the listing's secrets),
// though the other tenants hold 6 times more; a backend that cannot get a snapshot is listed
// through its ListSnapshots, reading everyone's.
func TestListSnapshotsCostsOwnSnapshots(t *testing.T) {
	onListingBackends(t, func(t *testing.T, w *world) {
		s := newSnapshotWorld(t, w)
		own := int64(len(s.all))
		req := &csi.ListSnapshotsRequest{Secrets: canarySecrets}
		for _, max := range []int32{0, 1, 2, 5, 6, 7} {
			var r readCounter
			var missing atomic.Int64
			got, _ := listWith(t, w.ledger, "blue", listSnapshots, req, max, secretsChecked(r.wrap(invokerOf(w.back, nil), false), &missing))
			if !sameSet(got, s.all) {
				t.Errorf("blue's ListSnapshots by %d: %v; want %v", max, got, s.all)
			}
			if r.calls.Load() > 2*own || r.entries.Load() > 2*own {
				t.Errorf("blue's ListSnapshots by %d: %d backend calls read %d entries; want at most %d (twice its own)", max, r.calls.Load(), r.entries.Load(), 2*own)
			}
			if missing.Load() > 0 {
				t.Errorf("blue's ListSnapshots by %d: %d GetSnapshot calls without the listing's secrets", max, missing.Load())
			}
		}
		if resp := w.must("blue", listSnapshots, req); strings.Contains(prototext.Format(resp), canarySecrets["password"]) {
			t.Errorf("blue's ListSnapshots answer shows the listing's secret: %v", resp)
		}
		var r readCounter
		got, _ := listWith(t, w.ledger, "blue", listSnapshots, req, 4, r.wrap(invokerOf(w.back, nil), true))
		if !sameSet(got, s.all) {
			t.Errorf("blue's ListSnapshots from the backend's listing: %v; want %v", got, s.all)
		}
		if all := own + int64(s.others); r.entries.Load() < all {
			t.Errorf("the backend's listing read %d entries; it has to read all %d", r.entries.Load(), all)
		}
	})
}

// TestListSnapshotsFilters: snapshot_id lists that snapshot only, and source_volume_id that
// volume's only (both: the snapshot if it is of the volume), each from the backend's own
// filtered listing, reading no more than the tenant's entries; a filter naming what the
// tenant does not own lists nothing without asking the backend. A page's token from a listing
// without filters is ABORTED with a filter, as is a token the gateway did not issue.
func TestListSnapshotsFilters(t *testing.T) {
	onListingBackends(t, func(t *testing.T, w *world) {
		s := newSnapshotWorld(t, w)
		vol, other := s.volumes[0], s.volumes[1]
		greenVol := w.createVolume("green", "pvc", mib)
		greenSnap := w.createSnapshot("green", "snap", greenVol)
		one := s.snaps[vol][1]
		for _, c := range []struct {
			name    string
			req     *csi.ListSnapshotsRequest
			want    []string
			backend bool // the backend is asked
		}{
			{"its snapshot", &csi.ListSnapshotsRequest{SnapshotId: one}, []string{one}, true},
			{"its volume", &csi.ListSnapshotsRequest{SourceVolumeId: vol}, s.snaps[vol], true},
			{"its snapshot of its volume", &csi.ListSnapshotsRequest{SnapshotId: one, SourceVolumeId: vol}, []string{one}, true},
			{"its snapshot of another of its volumes", &csi.ListSnapshotsRequest{SnapshotId: one, SourceVolumeId: other}, nil, true},
			{"green's snapshot", &csi.ListSnapshotsRequest{SnapshotId: greenSnap}, nil, false},
			{"green's snapshot as blue's", &csi.ListSnapshotsRequest{SnapshotId: "blue." + unscope(t, "green", greenSnap)}, nil, false},
			{"green's volume", &csi.ListSnapshotsRequest{SourceVolumeId: greenVol}, nil, false},
			{"green's volume as blue's", &csi.ListSnapshotsRequest{SourceVolumeId: "blue." + unscope(t, "green", greenVol)}, nil, false},
		} {
			for _, max := range []int32{0, 1, 2} {
				var r readCounter
				got, _ := listWith(t, w.ledger, "blue", listSnapshots, c.req, max, r.wrap(invokerOf(w.back, nil), false))
				if !sameSet(got, c.want) {
					t.Errorf("blue's ListSnapshots of %s by %d: %v; want %v", c.name, max, got, c.want)
				}
				if bound := 2 * int64(len(c.want)); r.entries.Load() > bound {
					t.Errorf("blue's ListSnapshots of %s by %d read %d backend entries; want at most %d", c.name, max, r.entries.Load(), bound)
				}
				if !c.backend && r.calls.Load() > 0 {
					t.Errorf("blue's ListSnapshots of %s by %d asked the backend %d times; want none", c.name, max, r.calls.Load())
				}
			}
		}
		first := w.must("blue", listSnapshots, &csi.ListSnapshotsRequest{MaxEntries: 1}).(*csi.ListSnapshotsResponse)
		_, err := w.call("blue", listSnapshots, &csi.ListSnapshotsRequest{MaxEntries: 1, SourceVolumeId: vol, StartingToken: first.GetNextToken()})
		wantCode(t, err, codes.Aborted, "without filters", "restart the listing")
		_, err = w.call("blue", listSnapshots, &csi.ListSnapshotsRequest{MaxEntries: 1, StartingToken: "nonsense"})
		wantCode(t, err, codes.Aborted, "restart the listing")
	})
}

// TestListSnapshotsDeletedMidListing: a snapshot deleted on the backend after the ledger
// named it to the listing, before the backend was asked for it (and one deleted between two
// pages), is left out; the listing goes on without an error, on every page size.
func TestListSnapshotsDeletedMidListing(t *testing.T) {
	onListingBackends(t, func(t *testing.T, w *world) {
		s := newSnapshotWorld(t, w)
		left := slices.Sorted(slices.Values(s.all)) // the order of the backend's IDs
		for _, max := range []int32{0, 1, 2} {
			doomed := left[len(left)/2] // deleted when the listing asks for it
			deleteFirst := func(ctx context.Context, method string, req proto.Message) (proto.Message, error) {
				if g, ok := req.(*csi.GetSnapshotRequest); ok && g.GetSnapshotId() == unscope(t, "blue", doomed) {
					if _, err := w.raw(deleteSnapshot, &csi.DeleteSnapshotRequest{SnapshotId: g.GetSnapshotId()}); err != nil {
						t.Fatal(err)
					}
				}
				return invokerOf(w.back, nil)(ctx, method, req)
			}
			left = slices.DeleteFunc(left, func(id string) bool { return id == doomed })
			if got, _ := listWith(t, w.ledger, "blue", listSnapshots, &csi.ListSnapshotsRequest{}, max, deleteFirst); !slices.Equal(got, left) {
				t.Errorf("blue's listing by %d, %s deleted as it was read: %v; want %v", max, doomed, got, left)
			}
			if _, ok, _ := w.ledger.Lookup(t.Context(), Snapshot, unscope(t, "blue", doomed)); !ok {
				t.Fatal("the ledger forgot a snapshot the gateway did not delete")
			}
		}
		// Between two pages, the tenant deletes the snapshot the second would begin with.
		page := w.must("blue", listSnapshots, &csi.ListSnapshotsRequest{MaxEntries: 1}).(*csi.ListSnapshotsResponse)
		if got := page.GetEntries()[0].GetSnapshot().GetSnapshotId(); got != left[0] {
			t.Fatalf("blue's first page: %s; want %s", got, left[0])
		}
		w.must("blue", deleteSnapshot, &csi.DeleteSnapshotRequest{SnapshotId: left[1]})
		var got []string
		for _, e := range w.must("blue", listSnapshots, &csi.ListSnapshotsRequest{StartingToken: page.GetNextToken()}).(*csi.ListSnapshotsResponse).GetEntries() {
			got = append(got, e.GetSnapshot().GetSnapshotId())
		}
		if !slices.Equal(got, left[2:]) {
			t.Errorf("blue's second page after %s was deleted: %v; want %v", left[1], got, left[2:])
		}
	})
}

// TestListVolumeGroupsCostsOwnGroups: a tenant's ListVolumeGroups, in pages of any size,
// reads one ControllerGetVolumeGroup per own group, whatever the other tenants hold.
func TestListVolumeGroupsCostsOwnGroups(t *testing.T) {
	onListingBackends(t, func(t *testing.T, w *world) {
		var blue []string
		for i := range 3 {
			vol := w.createVolume("blue", fmt.Sprintf("pvc-%d", i), mib)
			blue = append(blue, w.must("blue", createVolumeGroup, &volumegroup.CreateVolumeGroupRequest{Name: fmt.Sprintf("vg-%d", i), VolumeIds: []string{vol}}).(*volumegroup.CreateVolumeGroupResponse).GetVolumeGroup().GetVolumeGroupId())
		}
		for o := range 3 {
			tenant := fmt.Sprintf("other-%d", o)
			for i := range 6 {
				vol := w.createVolume(tenant, fmt.Sprintf("pvc-%d", i), mib)
				w.must(tenant, createVolumeGroup, &volumegroup.CreateVolumeGroupRequest{Name: fmt.Sprintf("vg-%d", i), VolumeIds: []string{vol}})
			}
		}
		for _, max := range []int32{0, 1, 2, 3, 4} {
			var r readCounter
			got, _ := listWith(t, w.ledger, "blue", listVolumeGroups, &volumegroup.ListVolumeGroupsRequest{}, max, r.wrap(invokerOf(w.back, nil), false))
			if !sameSet(got, blue) {
				t.Errorf("blue's ListVolumeGroups by %d: %v; want %v", max, got, blue)
			}
			if own := int64(len(blue)); r.calls.Load() > 2*own || r.entries.Load() > 2*own {
				t.Errorf("blue's ListVolumeGroups by %d: %d backend calls read %d entries; want at most %d (twice its own)", max, r.calls.Load(), r.entries.Load(), 2*own)
			}
		}
	})
}
