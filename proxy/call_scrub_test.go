package proxy

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/backends"
)

// TestBackendGetsTheCallsScrubber: the backend of a call can scrub the call's secrets (in
// every form: here flattened, as a rest backend would) from words it did not write, before it
// transforms them, through backends.CallInfo: on a serialized call (CreateVolume, run as a
// flight on a Call of its own) and on one that is not (ValidateVolumeCapabilities).
func TestBackendGetsTheCallsScrubber(t *testing.T) {
	onEachTransport(t, testBackendGetsTheCallsScrubber)
}

func testBackendGetsTheCallsScrubber(t *testing.T, tr Transport) {
	const secret = "pw-with-newline-7c3e\n"
	var mu sync.Mutex
	scrubbed := map[string]string{}
	f := &serverFake{answer: func(ctx context.Context, method string, _ []byte) ([]byte, error) {
		mu.Lock()
		scrubbed[method] = backends.CallInfoFrom(ctx).Scrub("echo pw-with-newline-7c3e end")
		mu.Unlock()
		return nil, nil
	}}
	ts := startServerHarness(t, tr, serverFakeOptions(f), ListenerPolicy{}, slog.LevelInfo)
	ctl := csi.NewControllerClient(ts.conn)
	ctx := serverCallCtx(t)
	req := serverCreateVolumeRequest("scrub-1")
	req.Secrets = map[string]string{"password": secret}
	if _, err := ctl.CreateVolume(ctx, req); err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	if _, err := ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1",
		VolumeCapabilities: []*csi.VolumeCapability{serverMountCap()}, Secrets: map[string]string{"password": secret}}); err != nil {
		t.Fatalf("ValidateVolumeCapabilities: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range []string{"/csi.v1.Controller/CreateVolume", "/csi.v1.Controller/ValidateVolumeCapabilities"} {
		if got, want := scrubbed[m], "echo *** end"; got != want {
			t.Errorf("%s: the backend's Scrub gave %q, want %q", m, got, want)
		}
	}
}
