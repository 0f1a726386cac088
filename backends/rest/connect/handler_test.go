package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// fake answers a few CSI calls and records what reached it. DeleteVolume fails on demand:
// volume ID "code:<name>" returns that Connect code, "plain-error" a non-status error and
// "slow" waits for its context to end.
type fake struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer

	mu       sync.Mutex
	deadline time.Time // of the last GetPluginInfo, zero if none
	md       metadata.MD
	created  *csi.CreateVolumeRequest
	slowDone chan error
}

var pluginInfo = &csi.GetPluginInfoResponse{Name: "embedded.csi-gateway.io", VendorVersion: "dev"}

func (f *fake) GetPluginInfo(ctx context.Context, _ *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline, _ = ctx.Deadline()
	f.md, _ = metadata.FromIncomingContext(ctx)
	return pluginInfo, nil
}

func (f *fake) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = req
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId: "vol-3f9c2a7d1b8e4c05", CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
	}}, nil
}

func (f *fake) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	switch name, ok := strings.CutPrefix(id, "code:"); {
	case ok:
		c, _ := ParseCodeName(name)
		st := status.Newf(c, "volume %q: injected failure", id)
		if c == codes.ResourceExhausted {
			st, _ = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
		}
		return nil, st.Err()
	case id == "plain-error":
		return nil, errors.New("disk on fire")
	case id == "slow":
		<-ctx.Done()
		if f.slowDone != nil {
			f.slowDone <- ctx.Err()
		}
		return nil, ctx.Err()
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (f *fake) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	return nil, status.Errorf(codes.NotFound, "volume %q does not exist on this appliance", req.GetVolumeId())
}

// ListSnapshots answers a message that protojson cannot encode (invalid UTF-8).
func (f *fake) ListSnapshots(context.Context, *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	return &csi.ListSnapshotsResponse{NextToken: "\xff"}, nil
}

type snapshotMetadata struct {
	csi.UnimplementedSnapshotMetadataServer
}

// serve starts a loopback server for f (Identity, Controller and the streaming
// SnapshotMetadata service) and closes it when the test ends.
func serve(t *testing.T, f *fake, opts ...HandlerOption) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewHandler([]Service{
		{Desc: &csi.Identity_ServiceDesc, Impl: f},
		{Desc: &csi.Controller_ServiceDesc, Impl: f},
		{Desc: &csi.SnapshotMetadata_ServiceDesc, Impl: snapshotMetadata{}},
	}, opts...))
	t.Cleanup(srv.Close)
	return srv
}

type request struct {
	method  string // POST when empty
	path    string
	header  map[string]string // Content-Type application/json unless set; "" deletes
	body    string
	chunked bool // hide the length so the body limit is found while reading
}

func do(t *testing.T, ctx context.Context, srv *httptest.Server, r request) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader = strings.NewReader(r.body)
	if r.chunked {
		body = io.MultiReader(body) // unknown length: sent chunked
	}
	method := cmpOr(r.method, http.MethodPost)
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range r.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// decodeError decodes an error body strictly: only "code" and "message" are allowed.
func decodeError(t *testing.T, b []byte) wireError {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var e wireError
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	return e
}

// errorCase is one request that must be answered with an error body.
type errorCase struct {
	name       string
	req        request
	wantStatus int
	wantCode   string
	wantHeader map[string]string
	wantInMsg  string
}

// checkErrorCases sends each case to srv and checks the whole answer: status, Content-Type,
// headers, and a strict error body whose message names the cause and never echoes the body.
func checkErrorCases(t *testing.T, srv *httptest.Server, tests []errorCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, t.Context(), srv, tt.req)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", resp.StatusCode, tt.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			for k, v := range tt.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			e := decodeError(t, body)
			if e.Code != tt.wantCode {
				t.Errorf("code = %q, want %q", e.Code, tt.wantCode)
			}
			if e.Message == "" || !strings.Contains(e.Message, tt.wantInMsg) {
				t.Errorf("message = %q, want it to contain %q", e.Message, tt.wantInMsg)
			}
			if strings.Contains(e.Message, strings.Repeat("a", 100)) {
				t.Errorf("message echoes the body: %.200q", e.Message)
			}
		})
	}
}

func TestHandlerErrors(t *testing.T) {
	srv := serve(t, &fake{}, WithMaxBodyBytes(1024))
	big := `{"volumeId":"` + strings.Repeat("a", 2048) + `"}`
	del := func(body string) request { return request{path: "/csi.v1.Controller/DeleteVolume", body: body} }
	checkErrorCases(t, srv, []errorCase{
		{"not found", del(`{"volumeId":"code:not_found"}`), 404, "not_found", nil, `volume "code:not_found": injected failure`},
		{"already exists", del(`{"volumeId":"code:already_exists"}`), 409, "already_exists", nil, "injected"},
		{"unavailable", del(`{"volumeId":"code:unavailable"}`), 503, "unavailable", nil, "injected"},
		{"failed precondition", del(`{"volumeId":"code:failed_precondition"}`), 400, "failed_precondition", nil, "injected"},
		{"canceled", del(`{"volumeId":"code:canceled"}`), 499, "canceled", nil, "injected"},
		{"resource exhausted with retry info", del(`{"volumeId":"code:resource_exhausted"}`), 429, "resource_exhausted", map[string]string{"Retry-After": "2"}, "injected"},
		{"unimplemented by embedding", request{path: "/csi.v1.Controller/ListVolumes", body: "{}"}, 501, "unimplemented", nil, "ListVolumes"},
		{"non-status error", del(`{"volumeId":"plain-error"}`), 500, "internal", nil, "disk on fire"},
		{"response cannot be encoded", request{path: "/csi.v1.Controller/ListSnapshots"}, 500, "internal", nil, "server log"},
		{"bad json", del(`{"volumeId":`), 400, "invalid_argument", nil, "csi.v1.DeleteVolumeRequest"},
		{"unknown json field", del(`{"volumeId":"v","bogus":1}`), 400, "invalid_argument", nil, "bogus"},
		{"wrong json type", del(`{"volumeId":5}`), 400, "invalid_argument", nil, "volumeId"},
		{"unknown method", request{path: "/csi.v1.Controller/NoSuchMethod"}, 404, "unimplemented", nil, "/csi.v1.Controller/NoSuchMethod"},
		{"unknown service", request{path: "/csi.v1.Nope/GetPluginInfo"}, 404, "unimplemented", nil, "csi.v1.Nope"},
		{"root path", request{path: "/"}, 404, "unimplemented", nil, "not served"},
		{"streaming method", request{path: "/csi.v1.SnapshotMetadata/GetMetadataAllocated", body: "{}"}, 501, "unimplemented", nil, "streaming"},
		{"GET", request{method: http.MethodGet, path: "/csi.v1.Identity/GetPluginInfo"}, 405, "unimplemented", map[string]string{"Allow": "POST"}, "GET"},
		{"body too large", del(big), 413, "resource_exhausted", nil, "1024-byte"},
		{"chunked body too large", request{path: "/csi.v1.Controller/DeleteVolume", body: big, chunked: true}, 413, "resource_exhausted", nil, "1024-byte"},
	})
}

func TestHandlerSuccess(t *testing.T) {
	srv := serve(t, &fake{})
	tests := []struct {
		name     string
		req      request
		want     proto.Message
		wantBody string // exact, when set
	}{
		{"empty body", request{path: "/csi.v1.Identity/GetPluginInfo"}, pluginInfo, ""},
		{"empty object, charset", request{path: "/csi.v1.Identity/GetPluginInfo", body: "{}",
			header: map[string]string{"Content-Type": "application/json; charset=UTF-8"}}, pluginInfo, ""},
		{"unpopulated fields left out", request{path: "/csi.v1.Controller/DeleteVolume", body: `{"volumeId":"v"}`},
			&csi.DeleteVolumeResponse{}, "{}"},
		{"proto field names accepted", request{path: "/csi.v1.Controller/CreateVolume",
			body: `{"name":"n","capacity_range":{"required_bytes":42}}`},
			&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-3f9c2a7d1b8e4c05", CapacityBytes: 42}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, t.Context(), srv, tt.req)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, Content-Type %q, body %s; want 200 application/json",
					resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			got := tt.want.ProtoReflect().New().Interface()
			if err := protojson.Unmarshal(body, got); err != nil {
				t.Fatalf("response %s: %v", body, err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("response = %v, want %v", got, tt.want)
			}
			if tt.wantBody != "" && string(body) != tt.wantBody {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
		})
	}
}

func TestHandlerClientGoneCancelsCall(t *testing.T) {
	f := &fake{slowDone: make(chan error, 1)}
	srv := serve(t, f)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/csi.v1.Controller/DeleteVolume",
		strings.NewReader(`{"volumeId":"slow"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("call returned %d, want the client to give up", resp.StatusCode)
	}
	select {
	case err := <-f.slowDone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("method's context ended with %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the method's context was not canceled when the client went away")
	}
}

func TestHandlerLogsInternalFailuresWithoutBody(t *testing.T) {
	var log testutil.SyncBuffer
	srv := serve(t, &fake{}, WithErrorLog(slog.New(slog.NewTextHandler(&log, nil))))
	do(t, t.Context(), srv, request{path: "/csi.v1.Controller/DeleteVolume",
		body: `{"volumeId":"plain-error","secrets":{"password":"s3cr3t"}}`})
	do(t, t.Context(), srv, request{path: "/csi.v1.Controller/ListSnapshots", body: `{"secrets":{"password":"s3cr3t"}}`})
	got := log.String()
	for _, want := range []string{"disk on fire", "/csi.v1.Controller/DeleteVolume", "/csi.v1.Controller/ListSnapshots"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "s3cr3t") {
		t.Errorf("log contains the request body:\n%s", got)
	}
}

func TestNewHandlerPanicsOnProgrammingErrors(t *testing.T) {
	tests := []struct {
		name     string
		services []Service
	}{
		{"nil desc", []Service{{Impl: &fake{}}}},
		{"nil impl", []Service{{Desc: &csi.Identity_ServiceDesc}}},
		{"wrong impl", []Service{{Desc: &csi.Node_ServiceDesc, Impl: &fake{}}}},
		{"twice", []Service{{Desc: &csi.Identity_ServiceDesc, Impl: &fake{}}, {Desc: &csi.Identity_ServiceDesc, Impl: &fake{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("NewHandler did not panic")
				}
			}()
			NewHandler(tt.services)
		})
	}
}
