package translate

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{"": Auto, "auto": Auto, "v1": V1, "V0": V0, " v0 ": V0} {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"v2", "0.3", "1"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) accepted", in)
		}
	}
}

// TestAutoV1DriverKeepsItsUnimplemented: with auto, a v1 backend's own UNIMPLEMENTED reaches
// the caller unchanged (the backend is found to speak v1), and v0 callers are translated from
// then on.
func TestAutoV1DriverKeepsItsUnimplemented(t *testing.T) {
	app := openAppliance(t)
	b := New("app", app, Auto)
	_, err := b.Unary(context.Background(), "/csi.v1.Controller/NoSuchMethod", nil)
	wantCode(t, "an unknown v1 method", err, codes.Unimplemented)
	if b.speaks.get() != V1 {
		t.Fatalf("detected %q, want v1", b.speaks.get())
	}
	var info csiv0.GetPluginInfoResponse
	if err := call(t, b, "/csi.v0.Identity/GetPluginInfo", &csiv0.GetPluginInfoRequest{}, &info); err != nil || info.GetName() == "" {
		t.Errorf("a v0 call after detection: %v, %v", &info, err)
	}
}
