package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// TestGatewayUserAgent: in front of a driver, on each of the gateway's transports, two
// callers with different user-agents: the driver sees on each call what it sees when the same
// caller calls it directly, followed by the token of the gateway's HTTP/2 client (as every
// grpc-go client appends its own); the capability fetch the gateway makes for itself carries
// the gateway's user-agent, csi-gateway/<version>, and no caller's.
func TestGatewayUserAgent(t *testing.T) { onEachTransport(t, testGatewayUserAgent) }

func testGatewayUserAgent(t *testing.T, transport string) {
	dir := t.TempDir()
	driver := startTestDriver(t, dir, "driver.sock", func(_ context.Context, c *driverCall, send func([]byte) error) error {
		if c.Method != "/csi.v1.Controller/ControllerGetCapabilities" {
			return nil // the empty answer
		}
		b, err := proto.Marshal(&csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME}}}}})
		if err != nil {
			return err
		}
		return send(b)
	})
	gw := startGatewayWith(t, dir, "transport: "+transport+"\n"+fmt.Sprintf(`backends:
  driver: {type: grpc, target: %q}
routes:
  - {methods: ["*"], backend: driver}
`, driver.Endpoint))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	token := "grpc-go/" + grpc.Version
	if transport == "frames" {
		token = "grpc-go-h2grpc/1"
	}
	callers := map[string]string{ // user-agent → the volume it unpublishes
		"csi-attacher/v4.8.0": "vol-attacher",
		"kubelet/v1.31.4":     "vol-kubelet",
	}
	for ua, volume := range callers {
		req := &csi.ControllerUnpublishVolumeRequest{VolumeId: volume, NodeId: "node-1"}
		for _, endpoint := range []string{gw.Endpoint, driver.Endpoint} {
			conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(ua))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := csi.NewControllerClient(conn).ControllerUnpublishVolume(ctx, req); err != nil {
				t.Fatalf("ControllerUnpublishVolume as %s at %s: %v", ua, endpoint, err)
			}
			conn.Close()
		}
	}
	seen := map[string][]string{} // volume → the user-agents the driver saw on its calls
	for _, c := range driver.Calls("/csi.v1.Controller/ControllerUnpublishVolume") {
		var req csi.ControllerUnpublishVolumeRequest
		if err := proto.Unmarshal(c.Request, &req); err != nil {
			t.Fatal(err)
		}
		seen[req.GetVolumeId()] = append(seen[req.GetVolumeId()], strings.Join(c.MD.Get("user-agent"), "|"))
	}
	t.Logf("the driver saw, by volume (through the gateway, then directly): %q", seen)
	for ua, volume := range callers {
		got := seen[volume]
		if len(got) != 2 {
			t.Fatalf("the driver saw %d calls for %s, want 2 (through the gateway, then directly): %q", len(got), volume, got)
		}
		if want := ua + " grpc-go/" + grpc.Version; got[1] != want {
			t.Errorf("called directly by %s, the driver saw %q, want %q", ua, got[1], want)
		}
		if want := got[1] + " " + token; got[0] != want {
			t.Errorf("called by %s through the gateway, the driver saw %q, want %q", ua, got[0], want)
		}
	}
	fetches := driver.Calls("/csi.v1.Controller/ControllerGetCapabilities")
	if len(fetches) == 0 {
		t.Fatal("the gateway fetched no capabilities")
	}
	for _, f := range fetches {
		ua := strings.Join(f.MD.Get("user-agent"), "|")
		t.Logf("the capability fetch: %q", ua)
		if !strings.HasPrefix(ua, "csi-gateway/") || !strings.HasSuffix(ua, " "+token) || strings.Count(ua, " ") != 1 {
			t.Errorf("the gateway's capability fetch carries user-agent %q, want csi-gateway/<version> %s", ua, token)
		}
	}
}
