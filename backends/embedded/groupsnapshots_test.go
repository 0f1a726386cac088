package embedded

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// grpVolume creates a 1 MiB volume and returns its ID.
func grpVolume(t *testing.T, a *Appliance, name string) string {
	t.Helper()
	resp, err := (&controllerServer{a: a}).CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name:               name,
		VolumeCapabilities: []*csi.VolumeCapability{rwo},
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetVolume().GetVolumeId()
}

// grpPublish publishes volume id to the appliance's own node.
func grpPublish(t *testing.T, a *Appliance, id string, readonly bool) {
	t.Helper()
	_, err := (&controllerServer{a: a}).ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{
		VolumeId: id, NodeId: a.cfg.NodeID, VolumeCapability: rwo, Readonly: readonly,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// grpCheckFiles fails the test unless the image folders hold exactly the images of the
// volumes and snapshots the state names: nothing left behind, nothing missing.
func grpCheckFiles(t *testing.T, a *Appliance) {
	t.Helper()
	var vols, snaps []string
	a.view(func(s *state) error {
		for id := range s.Volumes {
			vols = append(vols, id+imageSuffix)
		}
		for id := range s.Snapshots {
			snaps = append(snaps, id+imageSuffix)
		}
		return nil
	})
	for dir, want := range map[string][]string{a.images.volumesDir: vols, a.images.snapshotsDir: snaps} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %v, the state names %v", filepath.Base(dir), got, want)
		}
	}
}

func grpMemberIDs(gs *csi.VolumeGroupSnapshot) []string {
	var ids []string
	for _, sn := range gs.GetSnapshots() {
		ids = append(ids, sn.GetSnapshotId())
	}
	return ids
}

func TestGroupControllerGetCapabilities(t *testing.T) {
	g := &groupControllerServer{a: openTest(t, Config{})}
	resp, err := g.GroupControllerGetCapabilities(context.Background(), &csi.GroupControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	caps := resp.GetCapabilities()
	if len(caps) != 1 || caps[0].GetRpc().GetType() != csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT {
		t.Fatalf("capabilities = %v, want only CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT", caps)
	}
}

func TestGroupSnapshotCreateRefused(t *testing.T) {
	a := openTest(t, Config{})
	g := &groupControllerServer{a: a}
	v1, v2, v3 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2"), grpVolume(t, a, "v3")
	grpPublish(t, a, v1, false)
	grpPublish(t, a, v2, false)
	grpPublish(t, a, v3, true)
	tests := []struct {
		name      string
		req       *csi.CreateVolumeGroupSnapshotRequest
		code      codes.Code
		fragments []string
	}{
		{"no name", &csi.CreateVolumeGroupSnapshotRequest{SourceVolumeIds: []string{v3}}, codes.InvalidArgument, []string{"name is required"}},
		{"name over 128 bytes", &csi.CreateVolumeGroupSnapshotRequest{Name: strings.Repeat("n", 129), SourceVolumeIds: []string{v3}}, codes.InvalidArgument, []string{"at most 128"}},
		{"control character in name", &csi.CreateVolumeGroupSnapshotRequest{Name: "g\x1fv", SourceVolumeIds: []string{v3}}, codes.InvalidArgument, []string{"U+001F"}},
		{"no sources", &csi.CreateVolumeGroupSnapshotRequest{Name: "g"}, codes.InvalidArgument, []string{"source_volume_ids is required"}},
		{"empty source", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{v3, ""}}, codes.InvalidArgument, []string{"source_volume_ids[1] is required"}},
		{"source twice", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{v3, v3}}, codes.InvalidArgument, []string{"twice", v3}},
		{"unknown parameter", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{v3}, Parameters: map[string]string{"colour": "red"}}, codes.InvalidArgument, []string{`"colour"`, "retention"}},
		{"missing source", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{v3, "vol-nope"}}, codes.NotFound, []string{"vol-nope"}},
		{"two sources published read-write", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{v1, v3, v2}}, codes.FailedPrecondition, []string{v1, v2, "read-write"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.CreateVolumeGroupSnapshot(context.Background(), tt.req)
			wantCode(t, err, tt.code, tt.fragments...)
		})
	}
	a.view(func(s *state) error {
		if len(s.GroupSnapshots) != 0 || len(s.Snapshots) != 0 {
			t.Errorf("refused creates recorded %d group snapshots and %d snapshots", len(s.GroupSnapshots), len(s.Snapshots))
		}
		return nil
	})
	grpCheckFiles(t, a)

	// One writer among read-only sources cannot break the order between members.
	if _, err := g.CreateVolumeGroupSnapshot(context.Background(), &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{v1, v3}}); err != nil {
		t.Fatalf("one read-write source: %v", err)
	}
}

func TestGroupSnapshotIdempotency(t *testing.T) {
	a := openTest(t, Config{})
	g := &groupControllerServer{a: a}
	ctx := context.Background()
	v1, v2, v3 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2"), grpVolume(t, a, "v3")
	params := map[string]string{"retention": "7d"}
	first, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "nightly", SourceVolumeIds: []string{v1, v2}, Parameters: params})
	if err != nil {
		t.Fatal(err)
	}
	gs := first.GetGroupSnapshot()
	if gs.GetGroupSnapshotId() == "" || !gs.GetReadyToUse() || gs.GetCreationTime() == nil || len(gs.GetSnapshots()) != 2 {
		t.Fatalf("group snapshot = %v", gs)
	}
	for i, sn := range gs.GetSnapshots() {
		if sn.GetGroupSnapshotId() != gs.GetGroupSnapshotId() || sn.GetSourceVolumeId() != []string{v1, v2}[i] || !sn.GetReadyToUse() || sn.GetSizeBytes() != 1<<20 {
			t.Errorf("member %d = %v", i, sn)
		}
	}

	tests := []struct {
		name      string
		sources   []string
		params    map[string]string
		code      codes.Code
		fragments []string
	}{
		{"same arguments", []string{v1, v2}, params, codes.OK, nil},
		{"same sources in another order", []string{v2, v1}, params, codes.OK, nil},
		{"one source more", []string{v1, v2, v3}, params, codes.AlreadyExists, []string{"nightly", gs.GetGroupSnapshotId()}},
		{"one source less", []string{v1}, params, codes.AlreadyExists, []string{"nightly"}},
		{"other sources", []string{v1, v3}, params, codes.AlreadyExists, []string{"nightly"}},
		{"other parameters", []string{v1, v2}, map[string]string{"retention": "30d"}, codes.AlreadyExists, []string{"parameters"}},
		{"no parameters", []string{v1, v2}, nil, codes.AlreadyExists, []string{"parameters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "nightly", SourceVolumeIds: tt.sources, Parameters: tt.params})
			wantCode(t, err, tt.code, tt.fragments...)
			if tt.code == codes.OK {
				got := resp.GetGroupSnapshot()
				if got.GetGroupSnapshotId() != gs.GetGroupSnapshotId() || !slices.Equal(grpMemberIDs(got), grpMemberIDs(gs)) || !got.GetCreationTime().AsTime().Equal(gs.GetCreationTime().AsTime()) {
					t.Errorf("repeat answered %v, want %v", got, gs)
				}
			}
		})
	}
	a.view(func(s *state) error {
		if len(s.GroupSnapshots) != 1 || len(s.Snapshots) != 2 {
			t.Errorf("state holds %d group snapshots and %d snapshots, want 1 and 2", len(s.GroupSnapshots), len(s.Snapshots))
		}
		return nil
	})
	grpCheckFiles(t, a)

	// A repeat answers from the record even when the sources could no longer be copied
	// together, and a group snapshot name is not a snapshot name.
	grpPublish(t, a, v1, false)
	grpPublish(t, a, v2, false)
	if _, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "nightly", SourceVolumeIds: []string{v1, v2}, Parameters: params}); err != nil {
		t.Errorf("repeat after publishing: %v", err)
	}
	if _, err := (&controllerServer{a: a}).CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "nightly", SourceVolumeId: v3}); err != nil {
		t.Errorf("CreateSnapshot with a group snapshot's name: %v", err)
	}
}

func TestGroupSnapshotMembers(t *testing.T) {
	a := openTest(t, Config{})
	g, c := &groupControllerServer{a: a}, &controllerServer{a: a}
	ctx := context.Background()
	v1, v2 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2")
	data := []byte("written before the group snapshot")
	if err := os.WriteFile(a.images.volumePath(v2), append(data, make([]byte, 1<<20-len(data))...), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "gs", SourceVolumeIds: []string{v1, v2}})
	if err != nil {
		t.Fatal(err)
	}
	gs := resp.GetGroupSnapshot()
	lone, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "lone", SourceVolumeId: v1})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ListSnapshots shows members with their group", func(t *testing.T) {
		list, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		groupOf := map[string]string{}
		for _, e := range list.GetEntries() {
			groupOf[e.GetSnapshot().GetSnapshotId()] = e.GetSnapshot().GetGroupSnapshotId()
		}
		want := map[string]string{grpMemberIDs(gs)[0]: gs.GetGroupSnapshotId(), grpMemberIDs(gs)[1]: gs.GetGroupSnapshotId(), lone.GetSnapshot().GetSnapshotId(): ""}
		if len(groupOf) != len(want) {
			t.Fatalf("ListSnapshots = %v, want %v", groupOf, want)
		}
		for id, grp := range want {
			if groupOf[id] != grp {
				t.Errorf("snapshot %s listed in group %q, want %q", id, groupOf[id], grp)
			}
		}
		got, err := c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: grpMemberIDs(gs)[1]})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetSnapshot().GetGroupSnapshotId() != gs.GetGroupSnapshotId() {
			t.Errorf("GetSnapshot = %v", got.GetSnapshot())
		}
	})

	// The spec's DeleteSnapshot table: "Snapshot is part of a group | 3 INVALID_ARGUMENT".
	t.Run("DeleteSnapshot refuses a member", func(t *testing.T) {
		_, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: grpMemberIDs(gs)[0]})
		wantCode(t, err, codes.InvalidArgument, gs.GetGroupSnapshotId())
		if _, err := g.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: gs.GetGroupSnapshotId(), SnapshotIds: grpMemberIDs(gs)}); err != nil {
			t.Errorf("group snapshot after the refused delete: %v", err)
		}
		grpCheckFiles(t, a)
	})

	t.Run("a member seeds a new volume", func(t *testing.T) {
		src := &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: grpMemberIDs(gs)[1]}}}
		vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeContentSource: src})
		if err != nil {
			t.Fatal(err)
		}
		if vol.GetVolume().GetContentSource().GetSnapshot().GetSnapshotId() != grpMemberIDs(gs)[1] {
			t.Errorf("content source = %v", vol.GetVolume().GetContentSource())
		}
		b, err := os.ReadFile(a.images.volumePath(vol.GetVolume().GetVolumeId()))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, data) {
			t.Errorf("restored volume starts %q, want %q", b[:len(data)], data)
		}
	})
}

func TestGroupSnapshotAllOrNothing(t *testing.T) {
	a := openTest(t, Config{})
	g := &groupControllerServer{a: a}
	v1, v2, v3 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2"), grpVolume(t, a, "v3")
	// The last source's image cannot be read, so its copy fails after the others were cut.
	if err := os.Remove(a.images.volumePath(v3)); err != nil {
		t.Fatal(err)
	}
	_, err := g.CreateVolumeGroupSnapshot(context.Background(), &csi.CreateVolumeGroupSnapshotRequest{Name: "gs", SourceVolumeIds: []string{v1, v2, v3}})
	wantCode(t, err, codes.Internal, v3)
	a.view(func(s *state) error {
		if len(s.GroupSnapshots) != 0 || len(s.Snapshots) != 0 {
			t.Errorf("failed create recorded %d group snapshots and %d snapshots", len(s.GroupSnapshots), len(s.Snapshots))
		}
		return nil
	})
	entries, _ := os.ReadDir(a.images.snapshotsDir)
	if len(entries) != 0 {
		t.Errorf("failed create left %d snapshot files behind", len(entries))
	}
	// The same name works once the sources can be copied.
	if _, err := g.CreateVolumeGroupSnapshot(context.Background(), &csi.CreateVolumeGroupSnapshotRequest{Name: "gs", SourceVolumeIds: []string{v1, v2}}); err != nil {
		t.Fatal(err)
	}
}

func TestGroupSnapshotDeleteAndGet(t *testing.T) {
	a := openTest(t, Config{})
	g, c := &groupControllerServer{a: a}, &controllerServer{a: a}
	ctx := context.Background()
	v1, v2 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2")
	resp, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "gs", SourceVolumeIds: []string{v1, v2}})
	if err != nil {
		t.Fatal(err)
	}
	gs := resp.GetGroupSnapshot()
	id, members := gs.GetGroupSnapshotId(), grpMemberIDs(gs)
	lone, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "lone", SourceVolumeId: v1})
	if err != nil {
		t.Fatal(err)
	}

	gets := []struct {
		name string
		req  *csi.GetVolumeGroupSnapshotRequest
		code codes.Code
		frag []string
	}{
		{"no id", &csi.GetVolumeGroupSnapshotRequest{}, codes.InvalidArgument, []string{"group_snapshot_id is required"}},
		{"unknown id", &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "gsnap-nope"}, codes.NotFound, []string{"gsnap-nope"}},
		{"unknown id with snapshot ids", &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "gsnap-nope", SnapshotIds: members}, codes.NotFound, []string{"gsnap-nope"}},
		{"snapshot ids of another snapshot", &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: []string{members[0], lone.GetSnapshot().GetSnapshotId()}}, codes.InvalidArgument, []string{"do not match"}},
		{"too few snapshot ids", &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: members[:1]}, codes.InvalidArgument, []string{"do not match"}},
		{"members", &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: []string{members[1], members[0]}}, codes.OK, nil},
		{"no snapshot ids", &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id}, codes.OK, nil},
	}
	for _, tt := range gets {
		t.Run("get "+tt.name, func(t *testing.T) {
			resp, err := g.GetVolumeGroupSnapshot(ctx, tt.req)
			wantCode(t, err, tt.code, tt.frag...)
			if tt.code == codes.OK {
				got := resp.GetGroupSnapshot()
				if got.GetGroupSnapshotId() != id || !slices.Equal(grpMemberIDs(got), members) || !got.GetReadyToUse() || got.GetSnapshots()[0].GetGroupSnapshotId() != id {
					t.Errorf("got %v, want %v", got, gs)
				}
			}
		})
	}

	deletes := []struct {
		name string
		req  *csi.DeleteVolumeGroupSnapshotRequest
		code codes.Code
		frag []string
	}{
		{"no id", &csi.DeleteVolumeGroupSnapshotRequest{SnapshotIds: members}, codes.InvalidArgument, []string{"group_snapshot_id is required"}},
		{"empty snapshot id", &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: []string{members[0], ""}}, codes.InvalidArgument, []string{"snapshot_ids[1] is required"}},
		{"snapshot ids of another snapshot", &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: []string{members[0], lone.GetSnapshot().GetSnapshotId()}}, codes.InvalidArgument, []string{"do not match"}},
		{"one snapshot id more", &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: append(slices.Clone(members), lone.GetSnapshot().GetSnapshotId())}, codes.InvalidArgument, []string{"do not match"}},
		{"unknown id", &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "gsnap-nope", SnapshotIds: members}, codes.OK, nil},
	}
	for _, tt := range deletes {
		t.Run("delete "+tt.name, func(t *testing.T) {
			_, err := g.DeleteVolumeGroupSnapshot(ctx, tt.req)
			wantCode(t, err, tt.code, tt.frag...)
			if _, err := g.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id}); err != nil {
				t.Errorf("group snapshot after a refused delete: %v", err)
			}
		})
	}
	grpCheckFiles(t, a)

	if _, err := g.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: []string{members[1], members[0]}}); err != nil {
		t.Fatal(err)
	}
	_, err = g.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id})
	wantCode(t, err, codes.NotFound, id)
	list, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetEntries()) != 1 || list.GetEntries()[0].GetSnapshot().GetSnapshotId() != lone.GetSnapshot().GetSnapshotId() {
		t.Errorf("after the delete ListSnapshots = %v, want only %s", list.GetEntries(), lone.GetSnapshot().GetSnapshotId())
	}
	grpCheckFiles(t, a)
	for _, req := range []*csi.DeleteVolumeGroupSnapshotRequest{{GroupSnapshotId: id, SnapshotIds: members}, {GroupSnapshotId: id}} {
		if _, err := g.DeleteVolumeGroupSnapshot(ctx, req); err != nil {
			t.Errorf("repeated delete %v: %v", req, err)
		}
	}
}

func TestGroupSnapshotSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(Config{DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2")
	resp, err := (&groupControllerServer{a: a}).CreateVolumeGroupSnapshot(context.Background(), &csi.CreateVolumeGroupSnapshotRequest{Name: "gs", SourceVolumeIds: []string{v1, v2}, Parameters: map[string]string{"retention": "1d"}})
	if err != nil {
		t.Fatal(err)
	}
	want := resp.GetGroupSnapshot()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	a, err = Open(Config{DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g := &groupControllerServer{a: a}
	got, err := g.GetVolumeGroupSnapshot(context.Background(), &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: want.GetGroupSnapshotId(), SnapshotIds: grpMemberIDs(want)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(grpMemberIDs(got.GetGroupSnapshot()), grpMemberIDs(want)) || !got.GetGroupSnapshot().GetCreationTime().AsTime().Equal(want.GetCreationTime().AsTime()) {
		t.Errorf("after reopening: %v, want %v", got.GetGroupSnapshot(), want)
	}
	// The name, the sources and the parameters still make a repeat idempotent.
	again, err := g.CreateVolumeGroupSnapshot(context.Background(), &csi.CreateVolumeGroupSnapshotRequest{Name: "gs", SourceVolumeIds: []string{v2, v1}, Parameters: map[string]string{"retention": "1d"}})
	if err != nil || again.GetGroupSnapshot().GetGroupSnapshotId() != want.GetGroupSnapshotId() {
		t.Errorf("repeat after reopening: %v, %v", again, err)
	}
	grpCheckFiles(t, a)
}

// TestGroupServicesOverGRPC reaches both group services through Register and a real Unix
// socket, as a CO would.
func TestGroupServicesOverGRPC(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, Config{DataDir: filepath.Join(dir, "data")})
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	a.Register(srv)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := context.Background()

	v1, v2 := grpVolume(t, a, "v1"), grpVolume(t, a, "v2")
	vg, err := volumegroup.NewControllerClient(conn).CreateVolumeGroup(ctx, &volumegroup.CreateVolumeGroupRequest{Name: "app", VolumeIds: []string{v1, v2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(vg.GetVolumeGroup().GetVolumes()); got != 2 {
		t.Errorf("volume group holds %d volumes, want 2", got)
	}
	gc := csi.NewGroupControllerClient(conn)
	caps, err := gc.GroupControllerGetCapabilities(ctx, &csi.GroupControllerGetCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 1 {
		t.Fatalf("GroupControllerGetCapabilities: %v, %v", caps, err)
	}
	gs, err := gc.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "app-1", SourceVolumeIds: []string{v1, v2}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gc.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "app-1", SourceVolumeIds: []string{v1}})
	wantCode(t, err, codes.AlreadyExists, "app-1")
	if _, err := gc.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gs.GetGroupSnapshot().GetGroupSnapshotId(), SnapshotIds: grpMemberIDs(gs.GetGroupSnapshot())}); err != nil {
		t.Fatal(err)
	}
	_, err = volumegroup.NewControllerClient(conn).ControllerGetVolumeGroup(ctx, &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: "vg-nope"})
	wantCode(t, err, codes.NotFound, "vg-nope")
}
