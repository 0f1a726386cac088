package embedded

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// zone is a topology with the given segments.
func zone(segments ...string) *csi.Topology {
	t := &csi.Topology{Segments: map[string]string{}}
	for i := 0; i+1 < len(segments); i += 2 {
		t.Segments[segments[i]] = segments[i+1]
	}
	return t
}

// wantOwnZone fails the test unless sn is usable from the appliance's zone and nowhere else.
func wantOwnZone(t *testing.T, a *Appliance, sn *csi.Snapshot) {
	t.Helper()
	top := sn.GetAccessibleTopology()
	if len(top) != 1 || !proto.Equal(top[0], a.topology()) {
		t.Errorf("snapshot %s: accessible_topology %v, want [%v]", sn.GetSnapshotId(), top, a.topology())
	}
}

func TestCreateSnapshotTopology(t *testing.T) {
	a := openTest(t, Config{Zone: "zone-a"})
	c := &controllerServer{a: a}
	ctx := context.Background()
	vol := grpVolume(t, a, "src")
	here, there := zone(TopologyZoneKey, "zone-a"), zone(TopologyZoneKey, "zone-b")

	tests := []struct {
		name      string
		req       *csi.TopologyRequirement
		code      codes.Code
		fragments []string
	}{
		{"no requirements", nil, codes.OK, nil},
		{"requisite is the zone", &csi.TopologyRequirement{Requisite: []*csi.Topology{here}}, codes.OK, nil},
		{"requisite includes the zone", &csi.TopologyRequirement{Requisite: []*csi.Topology{there, here}, Preferred: []*csi.Topology{there}}, codes.OK, nil},
		{"preferred only, another zone", &csi.TopologyRequirement{Preferred: []*csi.Topology{there}}, codes.OK, nil},
		{"requisite another zone", &csi.TopologyRequirement{Requisite: []*csi.Topology{there}}, codes.ResourceExhausted, []string{"requisite", "zone-a"}},
		{"requisite with an unknown segment", &csi.TopologyRequirement{Requisite: []*csi.Topology{zone(TopologyZoneKey, "zone-a", "rack", "r1")}}, codes.ResourceExhausted, []string{"zone-a"}},
		{"empty requirement", &csi.TopologyRequirement{}, codes.InvalidArgument, []string{"set requisite or preferred"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap " + tt.name, SourceVolumeId: vol, AccessibilityRequirements: tt.req})
			wantCode(t, err, tt.code, tt.fragments...)
			if err == nil {
				wantOwnZone(t, a, resp.GetSnapshot())
			}
		})
	}

	// A snapshot that exists is still usable from its zone only: a repeated call that asks
	// for another zone is refused, not answered with it.
	first, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "again", SourceVolumeId: vol})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "again", SourceVolumeId: vol, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{there}}})
	wantCode(t, err, codes.ResourceExhausted, "zone-a")
	again, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "again", SourceVolumeId: vol, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{here}}})
	if err != nil || again.GetSnapshot().GetSnapshotId() != first.GetSnapshot().GetSnapshotId() {
		t.Fatalf("repeated with the zone: %v, %s; want %s", err, again.GetSnapshot().GetSnapshotId(), first.GetSnapshot().GetSnapshotId())
	}

	// Every other answer that carries a snapshot carries the zone too.
	got, err := c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: first.GetSnapshot().GetSnapshotId()})
	if err != nil {
		t.Fatal(err)
	}
	wantOwnZone(t, a, got.GetSnapshot())
	list, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
	if err != nil || len(list.GetEntries()) == 0 {
		t.Fatalf("list: %v, %d entries", err, len(list.GetEntries()))
	}
	for _, e := range list.GetEntries() {
		wantOwnZone(t, a, e.GetSnapshot())
	}
	group, err := (&groupControllerServer{a: a}).CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{vol}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range group.GetGroupSnapshot().GetSnapshots() {
		wantOwnZone(t, a, sn)
	}
}
