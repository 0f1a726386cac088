package csp

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp/cspfake"
)

const (
	getSnapshotMethod   = "/csi.v1.Controller/GetSnapshot"
	listSnapshotsMethod = "/csi.v1.Controller/ListSnapshots"
)

// GetSnapshot answers a snapshot as ListSnapshots shows it (on every profile, truenas too,
// which cannot list every snapshot), NOT_FOUND for one the CSP does not have and for the
// hidden source of a volume clone.
func TestGetSnapshot(t *testing.T) {
	for _, profile := range []cspfake.Profile{cspfake.ProfileSpec, cspfake.ProfileHPE, cspfake.ProfileTrueNAS} {
		t.Run(string(profile), func(t *testing.T) {
			r := newRig(t, profile)
			src, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-src"))
			if err != nil {
				t.Fatal(err)
			}
			srcID := src.GetVolume().GetVolumeId()
			snap, err := call[*csi.CreateSnapshotResponse](t, r, "/csi.v1.Controller/CreateSnapshot", &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: srcID})
			if err != nil {
				t.Fatal(err)
			}
			id := snap.GetSnapshot().GetSnapshotId()
			got, err := call[*csi.GetSnapshotResponse](t, r, getSnapshotMethod, &csi.GetSnapshotRequest{SnapshotId: id})
			if err != nil {
				t.Fatal(err)
			}
			list, err := call[*csi.ListSnapshotsResponse](t, r, listSnapshotsMethod, &csi.ListSnapshotsRequest{SnapshotId: id})
			if err != nil || len(list.GetEntries()) != 1 {
				t.Fatalf("ListSnapshots of %s: %v, %v", id, list, err)
			}
			if !proto.Equal(got.GetSnapshot(), list.GetEntries()[0].GetSnapshot()) || got.GetSnapshot().GetSourceVolumeId() != srcID {
				t.Errorf("GetSnapshot %v; ListSnapshots shows %v", got.GetSnapshot(), list.GetEntries()[0].GetSnapshot())
			}
			_, err = call[*csi.GetSnapshotResponse](t, r, getSnapshotMethod, &csi.GetSnapshotRequest{SnapshotId: "no-such-snapshot"})
			wantClass(t, err, backends.ClassNotFound)

			clone := createReq("pvc-clone")
			clone.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: srcID}}}
			cloned, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, clone)
			if err != nil {
				t.Fatal(err)
			}
			v, found, err := r.b.getVolume(t.Context(), "test", cloned.GetVolume().GetVolumeId())
			if err != nil || !found || v.BaseSnapshotID == "" {
				t.Fatalf("the clone on the CSP: %+v, %v, %v; want one made from a snapshot", v, found, err)
			}
			_, err = call[*csi.GetSnapshotResponse](t, r, getSnapshotMethod, &csi.GetSnapshotRequest{SnapshotId: v.BaseSnapshotID})
			wantClass(t, err, backends.ClassNotFound)
		})
	}
}

// GET_SNAPSHOT is advertised by every profile.
func TestGetSnapshotAdvertised(t *testing.T) {
	for name, p := range profiles {
		caps := p.controllerCapabilities()
		found := false
		for _, c := range caps {
			found = found || c == csi.ControllerServiceCapability_RPC_GET_SNAPSHOT
		}
		if !found {
			t.Errorf("profile %s does not advertise GET_SNAPSHOT: %v", name, caps)
		}
	}
}
