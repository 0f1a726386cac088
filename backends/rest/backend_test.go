package rest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/backends/rest/connect"
)

// serveAppliance serves the reference appliance over HTTP, as `csi-gateway appliance
// --http` does, and returns its URL.
func serveAppliance(t *testing.T) string {
	t.Helper()
	a, err := embedded.Open(embedded.Config{DataDir: t.TempDir()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	var r connect.Registrar
	a.Register(&r)
	srv := httptest.NewServer(connect.NewHandler(r.Services()))
	t.Cleanup(srv.Close)
	return srv.URL
}

// unary sends req to method through b and decodes the answer into resp.
func unary(t *testing.T, b *Backend, method string, req, resp proto.Message) error {
	t.Helper()
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Unary(t.Context(), method, raw)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(out, resp); err != nil {
		t.Fatalf("%s answered bytes that are not a %T: %v", method, resp, err)
	}
	return nil
}

// TestEndToEndWithAppliance runs calls through the backend against the real reference
// appliance behind the connect handler.
func TestEndToEndWithAppliance(t *testing.T) {
	b := newBackend(t, Config{}, serveAppliance(t))
	if err := b.Ready(t.Context()); err != nil {
		t.Fatalf("Ready: %v", err)
	}

	var info csi.GetPluginInfoResponse
	if err := unary(t, b, "/csi.v1.Identity/GetPluginInfo", &csi.GetPluginInfoRequest{}, &info); err != nil {
		t.Fatal(err)
	}
	if info.GetName() != "embedded.csi-gateway.io" {
		t.Errorf("plugin name %q", info.GetName())
	}

	var created csi.CreateVolumeResponse
	err := unary(t, b, createPath, &csi.CreateVolumeRequest{
		Name:          "pvc-e2e",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}, &created)
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetVolume().GetVolumeId()
	if id == "" || created.GetVolume().GetCapacityBytes() != 1<<30 {
		t.Fatalf("CreateVolume answered %v", &created)
	}

	var list csi.ListVolumesResponse
	if err := unary(t, b, "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.GetEntries()) != 1 || list.GetEntries()[0].GetVolume().GetVolumeId() != id {
		t.Errorf("ListVolumes answered %v, want the one volume %s", &list, id)
	}

	var deleted csi.DeleteVolumeResponse
	if err := unary(t, b, "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: id}, &deleted); err != nil {
		t.Fatal(err)
	}
	// The appliance answers OK for a volume it does not know, as CSI requires.
	if err := unary(t, b, "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "vol-unknown"}, &deleted); err != nil {
		t.Errorf("DeleteVolume of an unknown volume: %v, want OK", err)
	}
	var got csi.ControllerGetVolumeResponse
	err = unary(t, b, "/csi.v1.Controller/ControllerGetVolume", &csi.ControllerGetVolumeRequest{VolumeId: "vol-unknown"}, &got)
	checkError(t, err, backends.ClassNotFound, `backend "array1": ControllerGetVolume: `, "vol-unknown", "(not_found, HTTP 404)")

	// A request the appliance refuses: the class and its own words come through.
	err = unary(t, b, createPath, &csi.CreateVolumeRequest{}, &created)
	checkError(t, err, backends.ClassInvalid, `backend "array1": CreateVolume: `, "(invalid_argument, HTTP 400)")
}

func TestUnknownAndStreamingMethods(t *testing.T) {
	srv := newServer(t, reply(200, "application/json", "{}"))
	b := newBackend(t, Config{}, srv.URL)
	tests := []struct {
		method    string
		fragments []string
	}{
		{"/csi.v1.Controller/NoSuchMethod", []string{`backend "array1": /csi.v1.Controller/NoSuchMethod: not a method`}},
		{"/acme.Storage/Do", []string{"/acme.Storage/Do: not a method"}},
		{"garbage\n\x00" + strings.Repeat("x", 500), []string{"garbage"}},
		{"/csi.v1.SnapshotMetadata/GetMetadataDelta", []string{"streaming calls cannot be sent to a REST backend"}},
	}
	for _, tt := range tests {
		_, err := b.Unary(t.Context(), tt.method, nil)
		e := checkError(t, err, backends.ClassUnimplemented, tt.fragments...)
		if strings.ContainsAny(e.Message, "\n\x00") {
			t.Errorf("message %q is not one line", e.Message)
		}
	}
	err := b.Stream(t.Context(), "/csi.v1.SnapshotMetadata/GetMetadataAllocated", nil)
	checkError(t, err, backends.ClassUnimplemented,
		`backend "array1": /csi.v1.SnapshotMetadata/GetMetadataAllocated: streaming calls cannot be sent to a REST backend`)
	if srv.hits.Load() != 0 {
		t.Errorf("%d requests reached the appliance, want 0", srv.hits.Load())
	}
}

func TestInvalidRequestBytes(t *testing.T) {
	srv := newServer(t, reply(200, "application/json", created))
	b := newBackend(t, Config{}, srv.URL)
	_, err := b.Unary(t.Context(), createPath, []byte{0x0a, 0xff})
	checkError(t, err, backends.ClassInvalid, `backend "array1": CreateVolume: the request is not a valid csi.v1.CreateVolumeRequest`)
	if srv.hits.Load() != 0 {
		t.Errorf("%d requests reached the appliance, want 0", srv.hits.Load())
	}
}

// TestBadSuccessBodies: a 200 must carry the response message.
func TestBadSuccessBodies(t *testing.T) {
	tests := []struct {
		name, body string
		fragment   string
	}{
		{"garbage", "this is not json", `backend "array1" answered CreateVolume with a body that is not a CreateVolumeResponse: `},
		{"empty", "", "not a CreateVolumeResponse: the body is empty"},
		{"wrong type", `{"volume":"vol-1"}`, "not a CreateVolumeResponse"},
		{"html", "<html><body>Welcome to nginx!</body></html>", "not a CreateVolumeResponse"},
		{"too large", `{"volume":{"volumeId":"` + strings.Repeat("a", maxSuccessBody) + `"}}`, "a body larger than 4 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, reply(200, "application/json", tt.body))
			b := newBackend(t, Config{}, srv.URL)
			ctx, info := callContext(t)
			_, err := b.Unary(ctx, createPath, createRequest(t))
			checkError(t, err, backends.ClassInternal, tt.fragment)
			if info.Attempts() != 1 {
				t.Errorf("%d attempts, want 1", info.Attempts())
			}
		})
	}
}

func TestNewerApplianceFieldsAreDiscarded(t *testing.T) {
	srv := newServer(t, reply(200, "application/json",
		`{"volume":{"volumeId":"vol-1","capacityBytes":"1073741824","qosPolicy":"gold"},"etag":"x"}`))
	b := newBackend(t, Config{}, srv.URL)
	var resp csi.CreateVolumeResponse
	if err := unary(t, b, createPath, &csi.CreateVolumeRequest{Name: "pvc-1"}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.GetVolume().GetVolumeId() != "vol-1" || resp.GetVolume().GetCapacityBytes() != 1<<30 {
		t.Errorf("decoded %v", &resp)
	}
}

func TestReady(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		fragments []string // nil: ready
		class     backends.Class
	}{
		{"ready", 200, `{"ready":true}`, nil, 0},
		{"ready absent", 200, `{}`, nil, 0},
		{"warming up", 200, `{"ready":false}`, []string{`backend "array1": Probe: the appliance is not ready`}, backends.ClassUnavailable},
		{"unavailable", 503, `{"code":"unavailable","message":"starting"}`, []string{"starting (unavailable, HTTP 503)"}, backends.ClassUnavailable},
		{"wrong URL", 404, "", []string{"backends.array1.urls"}, backends.ClassUnavailable},
		{"garbage", 200, "ok", []string{`backend "array1" answered Probe with a body that is not a ProbeResponse`}, backends.ClassInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != probePath {
					t.Errorf("Ready called %s", r.URL.Path)
				}
				reply(tt.status, "application/json", tt.body)(n, w, r)
			})
			b := newBackend(t, Config{}, srv.URL)
			err := b.Ready(t.Context())
			if tt.fragments == nil {
				if err != nil {
					t.Fatalf("Ready: %v", err)
				}
				return
			}
			checkError(t, err, tt.class, tt.fragments...)
			if srv.hits.Load() != 1 {
				t.Errorf("%d probes, want 1: Ready does not retry answers", srv.hits.Load())
			}
		})
	}
}

func TestReadyTriesEveryURL(t *testing.T) {
	good := newServer(t, reply(200, "application/json", `{"ready":true}`))
	b := newBackend(t, Config{Retry: Retry{MaxAttempts: 1}}, refusedURL(t), refusedURL(t), good.URL)
	if err := b.Ready(t.Context()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if b.preferred.Load() != 2 {
		t.Errorf("preferred URL %d after Ready, want 2", b.preferred.Load())
	}
	b = newBackend(t, Config{}, refusedURL(t), refusedURL(t))
	ctx, info := backends.WithCallInfo(context.Background())
	checkError(t, b.Ready(ctx), backends.ClassUnavailable, "connection refused", "gave up after 2 attempts")
	if info.Attempts() != 2 {
		t.Errorf("%d attempts, want one per URL", info.Attempts())
	}
}

func TestClose(t *testing.T) {
	srv := newServer(t, reply(200, "application/json", created))
	b := newBackend(t, Config{}, srv.URL)
	if _, err := b.Unary(t.Context(), createPath, createRequest(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err := b.Unary(t.Context(), createPath, createRequest(t))
	checkError(t, err, backends.ClassUnavailable, `backend "array1": CreateVolume: the backend is closed`)
	checkError(t, b.Ready(t.Context()), backends.ClassUnavailable, "closed")
	if srv.hits.Load() != 1 {
		t.Errorf("%d requests, want 1 (none after Close)", srv.hits.Load())
	}
}
