package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// plaintextCanary is the CSI secret sent to an http:// appliance: it must reach it only when
// the operator opted in, and appear in no output either way.
const plaintextCanary = "CANARY-plaintext-5b9e"

// TestConnectSecretsOverPlaintextHTTP runs the real gateway in front of an appliance on
// plain http:// (a real HTTP server on loopback): by default a request carrying CSI secrets
// is refused before anything is sent, with a message naming the key that allows it, and a
// request without secrets goes; with backends.NAME.allowSecretsOverPlaintextHTTP: true the
// secret reaches the appliance. Both starts log a warning naming the key.
func TestConnectSecretsOverPlaintextHTTP(t *testing.T) {
	const create = "/csi.v1.Controller/CreateVolume"
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("allowSecretsOverPlaintextHTTP=%v", optIn), func(t *testing.T) {
			dir := t.TempDir()
			appliance := startConnectAppliance(t, func(w http.ResponseWriter, _ string, req proto.Message) {
				w.Header().Set("Content-Type", "application/json")
				name := req.(*csi.CreateVolumeRequest).GetName()
				_, _ = fmt.Fprintf(w, `{"volume":{"volumeId":%q,"capacityBytes":"1048576"}}`, "vol-"+name)
			})
			gw := startGatewayWith(t, dir, noValidation+fmt.Sprintf(`backends:
  array1: {type: rest, urls: [%q], allowSecretsOverPlaintextHTTP: %v, retry: {maxAttempts: 1}}
routes:
  - {methods: ["*"], backend: array1}
`, appliance.URL, optIn))
			wantWarning := "backends.array1.urls[0] is http://: requests that carry CSI secrets are refused (FAILED_PRECONDITION); " +
				"use https:// (with tls.ca), or set backends.array1.allowSecretsOverPlaintextHTTP: true to send them in the clear"
			if optIn {
				wantWarning = "backends.array1.allowSecretsOverPlaintextHTTP: true: the CSI secrets of requests cross the network in the clear to backends.array1.urls[0] (http://)"
			}
			waitOutput(t, gw.Process, wantWarning, 20*time.Second)

			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			ctl := csi.NewControllerClient(gw.Conn)
			_, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "no-secrets", VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
			checkStatus(t, "CreateVolume without secrets", err, codes.OK)

			_, err = ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "with-secrets", VolumeCapabilities: []*csi.VolumeCapability{mountCapability()},
				Secrets: map[string]string{"password": plaintextCanary}})
			sent := appliance.Requests(create)
			if optIn {
				checkStatus(t, "CreateVolume with secrets, opted in", err, codes.OK)
				if len(sent) != 2 || sent[1].(*csi.CreateVolumeRequest).GetSecrets()["password"] != plaintextCanary {
					t.Errorf("the appliance got %v, want both requests, the second with its secret", sent)
				}
			} else {
				st := checkStatus(t, "CreateVolume with secrets", err, codes.FailedPrecondition)
				for _, want := range []string{`backend "array1": CreateVolume: the request carries CSI secrets`, "backends.array1.urls[0] (" + appliance.URL + ") is http://",
					"set backends.array1.allowSecretsOverPlaintextHTTP: true"} {
					if !strings.Contains(st.Message(), want) {
						t.Errorf("the refusal %q does not say %q", st.Message(), want)
					}
				}
				if len(sent) != 1 {
					t.Errorf("the appliance got %d CreateVolume requests, want only the one without secrets", len(sent))
				}
			}
			// A last call whose log line follows every line before it.
			_, _ = csi.NewIdentityClient(gw.Conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
			waitOutput(t, gw.Process, `"method":"GetPluginInfo"`, 20*time.Second)
			if strings.Contains(gw.Output(), plaintextCanary) || strings.Contains(gw.Output(), "5b9e") {
				t.Errorf("the gateway's output holds the secret:\n%s", gw.Output())
			}
		})
	}
}
