package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
	"github.com/csi-gateway/csi-gateway/redact"
)

// listingHandler is the end of the chain as the server composes it, canonicalize, the
// listing guard and dispatch, in front of fake.
func listingHandler(fake backends.Backend) Handler {
	routes := routeTable{{Methods: []string{"*"}, Backend: "fake"}}
	return chain(dispatch(routes, map[string]backends.Backend{"fake": fake}), canonicalize(redact.NewRedactor(), nil), guardListings())
}

// TestPageTokensOf: exactly the four paged List methods have page tokens.
func TestPageTokensOf(t *testing.T) {
	var paged []string
	for name, info := range newMethodTable() {
		if info.paging != nil {
			paged = append(paged, name)
		}
	}
	want := map[string]bool{"/csi.v1.Controller/ListVolumes": true, "/csi.v1.Controller/ListSnapshots": true,
		"/csi.v1.Controller/ControllerListVolumeHealth": true, "/volumegroup.Controller/ListVolumeGroups": true,
		// CSI v0's lists: v0 too answers an invalid starting_token with ABORTED.
		"/csi.v0.Controller/ListVolumes": true, "/csi.v0.Controller/ListSnapshots": true}
	if len(paged) != len(want) {
		t.Errorf("paged methods %v, want %v", paged, want)
	}
	for _, m := range paged {
		if !want[m] {
			t.Errorf("%s has page tokens", m)
		}
	}
}

// TestListingRefusedToken: a backend's INVALID_ARGUMENT (a driver's status, or a REST
// backend's class invalid) for a List call that carried a starting_token is ABORTED, telling
// the caller to restart the listing; without a token, or with another class, the backend's
// answer stands.
func TestListingRefusedToken(t *testing.T) {
	const restart = "; csi-gateway: the backend refused the starting_token of this %s call, which CSI answers with ABORTED: restart the listing with an empty starting_token"
	for _, tc := range []struct {
		name   string
		method string
		req    proto.Message
		err    error
		code   codes.Code
		msg    string
	}{
		{"ListVolumes, driver status", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{StartingToken: "page-9"},
			status.Error(codes.InvalidArgument, "unknown token page-9"), codes.Aborted, "unknown token page-9" + fmt.Sprintf(restart, "ListVolumes")},
		{"ListSnapshots, REST class", "/csi.v1.Controller/ListSnapshots", &csi.ListSnapshotsRequest{StartingToken: "7"},
			backends.Errorf(backends.ClassInvalid, `backend "fake": bad offset (invalid_argument, HTTP 400)`), codes.Aborted,
			`backend "fake": bad offset (invalid_argument, HTTP 400)` + fmt.Sprintf(restart, "ListSnapshots")},
		{"ControllerListVolumeHealth", "/csi.v1.Controller/ControllerListVolumeHealth", &csi.ControllerListVolumeHealthRequest{StartingToken: "x"},
			status.Error(codes.InvalidArgument, "no"), codes.Aborted, "no" + fmt.Sprintf(restart, "ControllerListVolumeHealth")},
		{"ListVolumeGroups", "/volumegroup.Controller/ListVolumeGroups", &volumegroup.ListVolumeGroupsRequest{StartingToken: "x"},
			status.Error(codes.InvalidArgument, "no"), codes.Aborted, "no" + fmt.Sprintf(restart, "ListVolumeGroups")},
		{"no starting_token", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{MaxEntries: 5},
			status.Error(codes.InvalidArgument, "max_entries too large"), codes.InvalidArgument, "max_entries too large"},
		{"another class", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{StartingToken: "t"},
			status.Error(codes.Unavailable, "array busy"), codes.Unavailable, "array busy"},
		{"the backend's own ABORTED", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{StartingToken: "t"},
			status.Error(codes.Aborted, "stale token"), codes.Aborted, "stale token"},
		{"not a List call", "/csi.v1.Controller/ControllerGetVolume", &csi.ControllerGetVolumeRequest{VolumeId: "v"},
			status.Error(codes.InvalidArgument, "bad id"), codes.InvalidArgument, "bad id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &serverFake{answer: func(context.Context, string, []byte) ([]byte, error) { return nil, tc.err }}
			_, err := runValidated(t, listingHandler(fake), tc.method, tc.req)
			st := status.Convert(err)
			if st.Code() != tc.code || st.Message() != tc.msg {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
		})
	}
}

// TestListingRepeatedToken: an answer whose next_token is the starting_token it was given
// ends the listing with INTERNAL, naming the backend; any other answer passes unchanged.
func TestListingRepeatedToken(t *testing.T) {
	repeated := `backend "fake" answered %s with a next_token that repeats the starting_token it was given: following it would list the same entries forever, so the gateway ends the listing; fix the backend's paging`
	for _, tc := range []struct {
		name   string
		method string
		req    proto.Message
		resp   proto.Message
		code   codes.Code
		msg    string
	}{
		{"ListVolumes repeats", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{StartingToken: "p2"},
			&csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: &csi.Volume{VolumeId: "v"}}}, NextToken: "p2"},
			codes.Internal, fmt.Sprintf(repeated, "ListVolumes")},
		{"ListSnapshots repeats", "/csi.v1.Controller/ListSnapshots", &csi.ListSnapshotsRequest{StartingToken: "p2"},
			&csi.ListSnapshotsResponse{NextToken: "p2"}, codes.Internal, fmt.Sprintf(repeated, "ListSnapshots")},
		{"ListVolumeGroups repeats", "/volumegroup.Controller/ListVolumeGroups", &volumegroup.ListVolumeGroupsRequest{StartingToken: "p2"},
			&volumegroup.ListVolumeGroupsResponse{NextToken: "p2"}, codes.Internal, fmt.Sprintf(repeated, "ListVolumeGroups")},
		{"next page", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{StartingToken: "p2"}, &csi.ListVolumesResponse{NextToken: "p3"}, codes.OK, ""},
		{"last page", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{StartingToken: "p2"}, &csi.ListVolumesResponse{}, codes.OK, ""},
		{"first page", "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{}, &csi.ListVolumesResponse{NextToken: "p2"}, codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := proto.Marshal(tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			fake := &serverFake{answer: func(context.Context, string, []byte) ([]byte, error) { return want, nil }}
			got, err := runValidated(t, listingHandler(fake), tc.method, tc.req)
			st := status.Convert(err)
			if st.Code() != tc.code || st.Message() != tc.msg {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
			if tc.code == codes.OK && string(got) != string(want) {
				t.Errorf("the answer changed")
			}
		})
	}
}

// TestListingLoopsThroughServer: the guard is on every path of a real server. A caller of no
// tenant whose backend answers next_token = starting_token gets INTERNAL; a tenant, whose
// listing the gateway pages itself, gets INTERNAL as soon as the backend leads it back to a
// token it already followed (A → B → A: no page repeats its own token), after three backend
// calls instead of asking until the deadline.
func TestListingLoopsThroughServer(t *testing.T) {
	dir := t.TempDir()
	next := map[string]string{"": "A", "A": "B", "B": "A"}
	var calls atomic.Int32
	fake := &serverFake{answer: func(_ context.Context, method string, raw []byte) ([]byte, error) {
		if method == "/csi.v1.Controller/ControllerGetVolume" {
			// A backend without GET_VOLUME: a tenant's ListVolumes pages the backend's.
			return nil, status.Error(codes.Unimplemented, "no GET_VOLUME")
		}
		calls.Add(1)
		var req csi.ListVolumesRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			return nil, err
		}
		token := next[req.GetStartingToken()]
		if req.GetStartingToken() == "self" {
			token = "self"
		}
		// Entries no tenant owns: the tenancy layer asks for the next page.
		return proto.Marshal(&csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: &csi.Volume{VolumeId: "other-" + token}}}, NextToken: token})
	}}
	ledger, err := tenancy.Open(filepath.Join(dir, "tenancy.db"), map[string]tenancy.Quota{"blue": {}})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	if err := ledger.Record(context.Background(), tenancy.Volume, "blue-1", tenancy.Record{Tenant: "blue"}); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(Options{
		Routes:   []Route{{Methods: []string{"*"}, Backend: "array"}},
		Backends: map[string]backends.Backend{"array": fake},
		Log:      slog.New(slog.DiscardHandler), Tenancy: ledger,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	dial := func(name string, p ListenerPolicy) csi.ControllerClient {
		sock := filepath.Join(dir, name+".sock")
		l, err := Listen(Endpoint{Scheme: "unix", Address: sock}, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l, p)
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return csi.NewControllerClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err = dial("plain", ListenerPolicy{}).ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "self"})
	if st := status.Convert(err); st.Code() != codes.Internal ||
		st.Message() != `backend "array" answered ListVolumes with a next_token that repeats the starting_token it was given: following it would list the same entries forever, so the gateway ends the listing; fix the backend's paging` {
		t.Errorf("a caller of no tenant: %v %q", st.Code(), st.Message())
	}

	calls.Store(0)
	_, err = dial("blue", ListenerPolicy{Tenant: "blue"}).ListVolumes(ctx, &csi.ListVolumesRequest{})
	if st := status.Convert(err); st.Code() != codes.Internal ||
		st.Message() != `backend "array" answered ListVolumes with a next_token that repeats a token the gateway already sent it in this listing: following it would list the same entries forever, so the gateway ends the listing; fix the backend's paging` {
		t.Errorf("a tenant: %v %q", st.Code(), st.Message())
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the backend was asked %d times, want 3 (\"\", A, B)", n)
	}
}
