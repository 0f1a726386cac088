package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

// TestConnectUnknownFieldsRefused sends, through the real gateway to a connect appliance, a
// CreateVolume holding a field CSI v1.13 does not have: the protojson the backend writes
// cannot carry it, so the call is refused with INVALID_ARGUMENT naming the field, nothing is
// sent, and the same request without it goes through.
func TestConnectUnknownFieldsRefused(t *testing.T) {
	dir := t.TempDir()
	appliance := startConnectAppliance(t, func(w http.ResponseWriter, _ string, _ proto.Message) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"volume":{"volumeId":"vol-1","capacityBytes":"1048576"}}`))
	})
	gw := startGatewayWith(t, dir, noValidation+fmt.Sprintf(`backends:
  array1: {type: rest, urls: [%q], retry: {maxAttempts: 1}}
routes:
  - {methods: ["*"], backend: array1}
`, appliance.URL))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const create = "/csi.v1.Controller/CreateVolume"
	known := marshal(&csi.CreateVolumeRequest{Name: "unknown-1", VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
	var resp rawcodec.Frame
	err := gw.Conn.Invoke(ctx, create, &rawcodec.Frame{Payload: appendUnknown(known, 4242, "from a newer spec")}, &resp,
		grpc.ForceCodecV2(rawcodec.Codec{}))
	st := checkStatus(t, "CreateVolume with field 4242", err, codes.InvalidArgument)
	for _, want := range []string{`backend "array1": CreateVolume:`, "csi.v1.CreateVolumeRequest does not know (field 4242)",
		"route /csi.v1.Controller/CreateVolume to a grpc backend"} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("the refusal %q does not say %q", st.Message(), want)
		}
	}
	if n := len(appliance.Requests(create)); n != 0 {
		t.Errorf("the appliance got %d requests, want none", n)
	}
	err = gw.Conn.Invoke(ctx, create, &rawcodec.Frame{Payload: known}, &resp, grpc.ForceCodecV2(rawcodec.Codec{}))
	checkStatus(t, "CreateVolume without it", err, codes.OK)
}
