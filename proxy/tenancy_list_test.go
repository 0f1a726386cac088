package proxy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
)

// TestTenantListingShowsTheBackendsTruth: through the gateway's chain, a volume deleted on
// the backend behind the gateway's back (its NOT_FOUND answer to ControllerGetVolume turned
// into the code by the chain) leaves the tenant's listing, which goes on without an error.
func TestTenantListingShowsTheBackendsTruth(t *testing.T) {
	onEachTransport(t, func(t *testing.T, tr Transport) {
		ledger := openLedger(t, filepath.Join(t.TempDir(), "tenancy.db"), nil)
		be := openEmbedded(t)
		gw := startTenantGateway(t, tr, be, ledger, "blue")
		var own []string
		for _, name := range []string{"pvc-1", "pvc-2", "pvc-3"} {
			resp, err := gw.controller("blue").CreateVolume(serverCallCtx(t), serverCreateVolumeRequest(name))
			if err != nil {
				t.Fatal(err)
			}
			own = append(own, resp.GetVolume().GetVolumeId())
		}
		slices.Sort(own)
		req, _ := proto.Marshal(&csi.DeleteVolumeRequest{VolumeId: strings.TrimPrefix(own[1], "blue.")})
		if _, err := be.Unary(serverCallCtx(t), "/csi.v1.Controller/DeleteVolume", req); err != nil {
			t.Fatal(err)
		}
		for _, max := range []int32{0, 1} {
			if ids, _ := listPages(t, gw.controller("blue"), "", max); !slices.Equal(ids, []string{own[0], own[2]}) {
				t.Errorf("blue's listing by %d after %s was deleted on the backend: %v", max, own[1], ids)
			}
		}
	})
}
