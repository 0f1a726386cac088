package csp

import (
	"net/http"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp/cspfake"
)

// truenas-csp answers GET /volumes with an empty body: listing would be a wrong, empty
// answer, so LIST_VOLUMES (and LIST_SNAPSHOTS, which needs it) is not advertised, and a
// ListVolumes that comes anyway is UNIMPLEMENTED, never an empty OK.
func TestTrueNASCannotList(t *testing.T) {
	r := newRig(t, cspfake.ProfileTrueNAS)
	if _, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-listed")); err != nil {
		t.Fatal(err)
	}
	caps, err := call[*csi.ControllerGetCapabilitiesResponse](t, r, "/csi.v1.Controller/ControllerGetCapabilities", &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csi.ControllerServiceCapability_RPC_LIST_VOLUMES, csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS, csi.ControllerServiceCapability_RPC_GET_CAPACITY:
			t.Errorf("truenas advertises %v", c.GetRpc().GetType())
		}
	}
	_, err = call[*csi.ListVolumesResponse](t, r, "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{})
	wantClass(t, err, backends.ClassUnimplemented)
}

// truenas-csp's lookups answer 404 while its array times out (truenas-csp#67), and its create
// of a name that exists fails with a traceback: the gateway answers UNAVAILABLE (retry the
// same name) and never makes a second volume; the retry finds the first.
func TestTrueNASMaskedLookup(t *testing.T) {
	r := newRig(t, cspfake.ProfileTrueNAS)
	first, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-masked"))
	if err != nil {
		t.Fatal(err)
	}
	masked := cspfake.Fault{Method: http.MethodGet, Path: "/volumes", Status: http.StatusNotFound,
		Body: `{"errors":[{"code":"Not Found","message":"Volume pvc-masked not found"}]}`, Times: 2}
	r.fake.Inject(masked)
	_, err = call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-masked"))
	wantClass(t, err, backends.ClassUnavailable)
	again, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-masked"))
	if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
		t.Fatalf("the retry: %v, %v; want volume %s", again, err, first.GetVolume().GetVolumeId())
	}
	if n := r.fake.Counters().Volumes; n != 1 {
		t.Errorf("%d volumes, want 1", n)
	}
}

// truenas-csp answers an empty-bodied 404 to deleting what is not there: absent, OK. The
// same empty 404 to a GET is not the CSP's "not found" shape, so not absent.
func TestTrueNASEmptyNotFoundOnDelete(t *testing.T) {
	r := newRig(t, cspfake.ProfileTrueNAS)
	r.fake.Inject(cspfake.Fault{Method: http.MethodDelete, Path: "/volumes/*", Status: http.StatusNotFound, EmptyBody: true})
	if _, err := call[*csi.DeleteVolumeResponse](t, r, deleteVolumeMethod, &csi.DeleteVolumeRequest{VolumeId: "tank_csi_gone"}); err != nil {
		t.Errorf("DeleteVolume answered an empty 404: %v, want OK", err)
	}
	r.fake.Inject(cspfake.Fault{Method: http.MethodGet, Path: "/volumes/*", Status: http.StatusNotFound, EmptyBody: true})
	_, err := call[*csi.ControllerGetVolumeResponse](t, r, getVolumeMethod, &csi.ControllerGetVolumeRequest{VolumeId: "tank_csi_gone"})
	wantClass(t, err, backends.ClassUnavailable)
}

// Names a truenas CSP cannot take (too long for its dataset paths, or with "_") are fitted
// stably: created, found again by a retry, still one volume.
func TestTrueNASLongNames(t *testing.T) {
	r := newRig(t, cspfake.ProfileTrueNAS)
	name := "pvc_0123456789012345678901234567890123456789012345678901234567890123456789"
	first, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq(name))
	if err != nil {
		t.Fatal(err)
	}
	again, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq(name))
	if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() || r.fake.Counters().Volumes != 1 {
		t.Fatalf("the retry of a long name: %v, %v; %d volumes", again, err, r.fake.Counters().Volumes)
	}
}
