package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/grpc"
	"github.com/csi-gateway/csi-gateway/backends/rest"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy"
)

// The expectations of these tests are written out here from docs/errors.md, on purpose not
// computed by the code under test, so that a change of either shows up as a failure.

// errMapClassCode is docs/errors.md's "Every other failure, for every RPC" table.
var errMapClassCode = map[string]codes.Code{
	"internal":        codes.Internal,
	"not-found":       codes.NotFound,
	"already-exists":  codes.AlreadyExists,
	"invalid":         codes.InvalidArgument,
	"precondition":    codes.FailedPrecondition,
	"out-of-range":    codes.OutOfRange,
	"exhausted":       codes.ResourceExhausted,
	"aborted":         codes.Aborted,
	"unavailable":     codes.Unavailable,
	"deadline":        codes.DeadlineExceeded,
	"canceled":        codes.Canceled,
	"unauthenticated": codes.Unauthenticated,
	"permission":      codes.PermissionDenied,
	"unimplemented":   codes.Unimplemented,
}

// errMapOKWhenNotFound are the RPCs of docs/errors.md's RPC-specific rules: each turns a
// not-found failure into OK (deleting or unpublishing what is already gone).
var errMapOKWhenNotFound = map[string]bool{
	"/csi.v1.Controller/DeleteVolume":                   true,
	"/csi.v1.Controller/DeleteSnapshot":                 true,
	"/csi.v1.GroupController/DeleteVolumeGroupSnapshot": true,
	"/volumegroup.Controller/DeleteVolumeGroup":         true,
	"/csi.v1.Node/NodeUnstageVolume":                    true,
	"/csi.v1.Node/NodeUnpublishVolume":                  true,
	"/csi.v1.Controller/ControllerUnpublishVolume":      true,
	// CSI v0's rows: its deletes as v1's; its unpublish and unstage keep NOT_FOUND.
	"/csi.v0.Controller/DeleteVolume":   true,
	"/csi.v0.Controller/DeleteSnapshot": true,
}

// errMapProbes are the Probe RPCs of docs/errors.md's rules: a backend that is unavailable or
// out of time is a plugin that is not healthy, FAILED_PRECONDITION.
var errMapProbes = map[string]bool{"/csi.v1.Identity/Probe": true, "/csi.v0.Identity/Probe": true}

// errMapWant is the code a caller of method gets when the backend fails with class.
func errMapWant(method, class string) codes.Code {
	if class == "not-found" && errMapOKWhenNotFound[method] {
		return codes.OK
	}
	if (class == "unavailable" || class == "deadline") && errMapProbes[method] {
		return codes.FailedPrecondition
	}
	code, ok := errMapClassCode[class]
	if !ok {
		panic("no such class in docs/errors.md: " + class)
	}
	return code
}

// errMapClassOfGRPC is the class of a gRPC driver's status code (docs/errors.md §1: a gRPC
// driver's status becomes a class): each code is its own class; UNKNOWN and DATA_LOSS are
// internal.
var errMapClassOfGRPC = map[codes.Code]string{
	codes.Canceled:           "canceled",
	codes.Unknown:            "internal",
	codes.InvalidArgument:    "invalid",
	codes.DeadlineExceeded:   "deadline",
	codes.NotFound:           "not-found",
	codes.AlreadyExists:      "already-exists",
	codes.PermissionDenied:   "permission",
	codes.ResourceExhausted:  "exhausted",
	codes.FailedPrecondition: "precondition",
	codes.Aborted:            "aborted",
	codes.OutOfRange:         "out-of-range",
	codes.Unimplemented:      "unimplemented",
	codes.Internal:           "internal",
	codes.Unavailable:        "unavailable",
	codes.DataLoss:           "internal",
	codes.Unauthenticated:    "unauthenticated",
}

// errMapClassOfHTTP is docs/errors.md's "How HTTP answers are classified" table, for an answer
// whose body carries no recognised code: the status decides, and a 404 is a wrong URL.
var errMapClassOfHTTP = map[int]string{
	400: "invalid",
	401: "unauthenticated",
	403: "permission",
	404: "unavailable",
	408: "deadline",
	409: "aborted",
	412: "precondition",
	429: "unavailable",
	500: "internal",
	501: "unimplemented",
	502: "unavailable",
	503: "unavailable",
	504: "deadline",
}

// errMapRetried and errMapNeverRetried are the "retried" column of the same table in
// docs/errors.md, for the statuses of this test.
var (
	errMapRetried      = map[int]bool{429: true, 502: true, 503: true, 504: true}
	errMapNeverRetried = map[int]bool{400: true, 401: true, 403: true, 404: true, 409: true, 412: true, 500: true, 501: true}
)

// errMapConnectCodes are the Connect error codes (docs/rest-protocol.md), each with the HTTP
// status an appliance sends it with, and the class it means (the class of its gRPC code).
var errMapConnectCodes = []struct {
	name   string
	status int
	class  string
}{
	{"canceled", 499, "canceled"},
	{"unknown", 500, "internal"},
	{"invalid_argument", 400, "invalid"},
	{"deadline_exceeded", 504, "deadline"},
	{"not_found", 404, "not-found"},
	{"already_exists", 409, "already-exists"},
	{"permission_denied", 403, "permission"},
	{"resource_exhausted", 429, "exhausted"},
	{"failed_precondition", 400, "precondition"},
	{"aborted", 409, "aborted"},
	{"out_of_range", 400, "out-of-range"},
	{"unimplemented", 501, "unimplemented"},
	{"internal", 500, "internal"},
	{"unavailable", 503, "unavailable"},
	{"data_loss", 500, "internal"},
	{"unauthenticated", 401, "unauthenticated"},
}

// errMapRPC is one RPC driven through the gateway: a valid request and a fresh response.
type errMapRPC struct {
	method string
	req    proto.Message
	resp   func() proto.Message
}

func errMapCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// errMapRPCs are every RPC with a rule of its own in csispec/errors.go and some without.
var errMapRPCs = []errMapRPC{
	{"/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "vol-1"},
		func() proto.Message { return &csi.DeleteVolumeResponse{} }},
	{"/csi.v1.Controller/DeleteSnapshot", &csi.DeleteSnapshotRequest{SnapshotId: "snap-1"},
		func() proto.Message { return &csi.DeleteSnapshotResponse{} }},
	{"/csi.v1.GroupController/DeleteVolumeGroupSnapshot",
		&csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "gsnap-1", SnapshotIds: []string{"snap-1", "snap-2"}},
		func() proto.Message { return &csi.DeleteVolumeGroupSnapshotResponse{} }},
	{"/volumegroup.Controller/DeleteVolumeGroup", &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: "vg-1"},
		func() proto.Message { return &volumegroup.DeleteVolumeGroupResponse{} }},
	{"/csi.v1.Node/NodeUnstageVolume", &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/var/lib/kubelet/staging/vol-1"},
		func() proto.Message { return &csi.NodeUnstageVolumeResponse{} }},
	{"/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/var/lib/kubelet/pods/p/vol-1"},
		func() proto.Message { return &csi.NodeUnpublishVolumeResponse{} }},
	{"/csi.v1.Controller/ControllerUnpublishVolume", &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1"},
		func() proto.Message { return &csi.ControllerUnpublishVolumeResponse{} }},

	{"/csi.v1.Controller/CreateVolume", &csi.CreateVolumeRequest{Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{errMapCapability()}},
		func() proto.Message { return &csi.CreateVolumeResponse{} }},
	{"/csi.v1.Controller/ControllerPublishVolume", &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1",
		VolumeCapability: errMapCapability()},
		func() proto.Message { return &csi.ControllerPublishVolumeResponse{} }},
	{"/csi.v1.Controller/ControllerGetVolume", &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"},
		func() proto.Message { return &csi.ControllerGetVolumeResponse{} }},
	{"/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/var/lib/kubelet/staging/vol-1",
		VolumeCapability: errMapCapability()},
		func() proto.Message { return &csi.NodeStageVolumeResponse{} }},
}

// errMapV0RPCs are every CSI v0 RPC (v0.2's and v0.3's), each with a valid request, sorted.
func errMapV0RPCs(t *testing.T) []errMapRPC {
	var rpcs []errMapRPC
	for method, req := range testutil.V0Requests(nil) {
		service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
		if err != nil {
			t.Fatal(err)
		}
		out := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name)).Output()
		mt, err := protoregistry.GlobalTypes.FindMessageByName(out.FullName())
		if err != nil {
			t.Fatal(err)
		}
		rpcs = append(rpcs, errMapRPC{method, req, func() proto.Message { return mt.New().Interface() }})
	}
	slices.SortFunc(rpcs, func(a, b errMapRPC) int { return strings.Compare(a.method, b.method) })
	return rpcs
}

// errMapGateway serves a proxy.Server with every method routed to be (called name) on a Unix
// socket in a temporary directory, and returns a client connection to it.
func errMapGateway(t *testing.T, name string, be backends.Backend) *grpc.ClientConn {
	t.Helper()
	srv, err := proxy.NewServer(proxy.Options{
		Routes:   []proxy.Route{{Methods: []string{"*"}, Backend: name}},
		Backends: map[string]backends.Backend{name: be},
		Log:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := serveOnSocket(t, srv)
	return conn
}

// errMapCall sends rpc through conn and checks the caller's status against want: the code;
// for OK an empty response; otherwise a message that is non-empty, at most 1 KiB, valid
// UTF-8, names the backend and holds each of said, and no details.
func errMapCall(t *testing.T, conn *grpc.ClientConn, rpc errMapRPC, want codes.Code, backend string, said ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp := rpc.resp()
	err := conn.Invoke(ctx, rpc.method, rpc.req, resp)
	st := status.Convert(err)
	if st.Code() != want {
		t.Errorf("code = %v, want %v (message %q)", st.Code(), want, st.Message())
		return
	}
	if want == codes.OK {
		if n := proto.Size(resp); n != 0 {
			t.Errorf("response = %v (%d bytes), want an empty %s", resp, n, resp.ProtoReflect().Descriptor().FullName())
		}
		return
	}
	msg := st.Message()
	switch {
	case msg == "":
		t.Errorf("empty message")
	case len(msg) > 1024:
		t.Errorf("message is %d bytes, more than 1 KiB", len(msg))
	case !utf8.ValidString(msg):
		t.Errorf("message is not valid UTF-8: %q", msg)
	}
	if !strings.Contains(msg, fmt.Sprintf("backend %q", backend)) {
		t.Errorf("message %q does not name backend %q", msg, backend)
	}
	for _, s := range said {
		if !strings.Contains(msg, s) {
			t.Errorf("message %q does not hold %q", msg, s)
		}
	}
	if d := st.Proto().GetDetails(); len(d) != 0 {
		t.Errorf("details = %v, want none", d)
	}
}

// errMapDriver is a CSI driver for every method that answers each call with the status set by
// answer, with details attached, and records the methods it was called with.
type errMapDriver struct {
	mu      sync.Mutex
	code    codes.Code
	msg     string
	methods []string
}

func (d *errMapDriver) answer(code codes.Code, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.code, d.msg, d.methods = code, msg, nil
}

func (d *errMapDriver) called() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.methods...)
}

func (d *errMapDriver) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var req emptypb.Empty // holds the request's fields as unknown fields
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	d.mu.Lock()
	code, msg := d.code, d.msg
	d.methods = append(d.methods, method)
	d.mu.Unlock()
	if code == codes.OK {
		return stream.SendMsg(&emptypb.Empty{})
	}
	st, err := status.New(code, msg).WithDetails(
		&errdetails.ErrorInfo{Reason: "DRIVER_REFUSED", Domain: "driver.example", Metadata: map[string]string{"volume": "vol-1"}},
		&errdetails.DebugInfo{Detail: "driver stack trace: main.go:42"},
		&errdetails.RetryInfo{},
	)
	if err != nil {
		return err
	}
	return st.Err()
}

// TestErrorMappingGRPC drives the gateway in front of a real grpc backend whose driver answers
// every gRPC code, and checks what the caller gets for each RPC: the v1 and VolumeGroup RPCs
// of errMapRPCs, and every CSI v0 RPC (v0's own rows of the table).
func TestErrorMappingGRPC(t *testing.T) {
	driver := &errMapDriver{}
	driverSock := filepath.Join(t.TempDir(), "driver.sock")
	l, err := net.Listen("unix", driverSock)
	if err != nil {
		t.Fatal(err)
	}
	ds := grpc.NewServer(grpc.UnknownServiceHandler(driver.handle))
	go ds.Serve(l)
	t.Cleanup(ds.Stop)

	// The table drives one failure after another: no circuit breaker, or it would open.
	be, err := grpcbackend.New("driver", grpcbackend.Config{Target: "unix://" + driverSock},
		grpcbackend.WithCircuitBreaker(backends.BreakerConfig{Disable: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	conn := errMapGateway(t, "driver", be)

	type answer struct {
		name  string
		code  codes.Code
		msg   string
		class string // "" for success
		said  []string
	}
	var answers []answer
	for _, code := range []codes.Code{codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition, codes.Unavailable,
		codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.ResourceExhausted, codes.Aborted, codes.InvalidArgument,
		codes.Unimplemented, codes.OutOfRange, codes.PermissionDenied, codes.Unauthenticated, codes.DataLoss, codes.Canceled} {
		msg := fmt.Sprintf("the driver says %s for vol-1", code)
		answers = append(answers, answer{name: code.String(), code: code, msg: msg, class: errMapClassOfGRPC[code], said: []string{msg}})
	}
	long := strings.Repeat("échec ", 600) // 4200 bytes of two-byte runes
	answers = append(answers,
		answer{name: "NotFound without a message", code: codes.NotFound, class: "not-found"},
		answer{name: "Internal with a long message", code: codes.Internal, msg: long, class: "internal", said: []string{"échec échec"}},
		answer{name: "Unavailable without a message", code: codes.Unavailable, class: "unavailable"},
		answer{name: "OK", code: codes.OK},
	)

	for _, rpc := range append(slices.Clone(errMapRPCs), errMapV0RPCs(t)...) {
		name := rpc.method[strings.LastIndex(rpc.method, "/")+1:]
		if strings.HasPrefix(rpc.method, "/csi.v0.") {
			name = "v0-" + name
		}
		t.Run(name, func(t *testing.T) {
			for _, a := range answers {
				t.Run(a.name, func(t *testing.T) {
					driver.answer(a.code, a.msg)
					want := codes.OK
					if a.class != "" {
						want = errMapWant(rpc.method, a.class)
					}
					errMapCall(t, conn, rpc, want, "driver", a.said...)
					if got := driver.called(); len(got) != 1 || got[0] != rpc.method {
						t.Errorf("the driver was called with %v, want [%s] once", got, rpc.method)
					}
				})
			}
		})
	}
}

// errMapAppliance is an HTTP appliance that answers every request with the answer set last,
// and counts the requests.
type errMapAppliance struct {
	mu          sync.Mutex
	status      int
	contentType string
	body        string
	hits        int
	paths       []string
}

func (a *errMapAppliance) answer(status int, contentType, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status, a.contentType, a.body, a.hits, a.paths = status, contentType, body, 0, nil
}

func (a *errMapAppliance) seen() (int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hits, append([]string(nil), a.paths...)
}

func (a *errMapAppliance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	a.mu.Lock()
	a.hits++
	a.paths = append(a.paths, r.Method+" "+r.URL.Path)
	status, ct, body := a.status, a.contentType, a.body
	a.mu.Unlock()
	if ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// errMapHTTPAnswer is one answer of the appliance and the class docs/errors.md gives it.
type errMapHTTPAnswer struct {
	name        string
	status      int
	contentType string
	body        string
	class       string   // "" for success
	coded       bool     // the body carries a code, which wins over the status
	said        []string // what the caller's message must repeat
}

// errMapHTTPAnswers are each status of the test with each body form, each Connect code, and
// success.
func errMapHTTPAnswers() []errMapHTTPAnswer {
	const said = "pool p1 says m"
	var out []errMapHTTPAnswer
	for _, s := range []int{400, 401, 403, 404, 409, 412, 429, 500, 501, 502, 503, 504} {
		text := http.StatusText(s)
		class := errMapClassOfHTTP[s]
		out = append(out,
			errMapHTTPAnswer{name: fmt.Sprintf("%d/connect", s), status: s, contentType: "application/json",
				body: `{"code":"not_found","message":"` + said + `"}`, class: "not-found", coded: true, said: []string{said}},
			errMapHTTPAnswer{name: fmt.Sprintf("%d/google.rpc.Status", s), status: s, contentType: "application/json",
				body: `{"code":5,"message":"` + said + `"}`, class: "not-found", coded: true, said: []string{said}},
			errMapHTTPAnswer{name: fmt.Sprintf("%d/problem+json", s), status: s, contentType: "application/problem+json",
				body:  fmt.Sprintf(`{"type":"about:blank","title":%q,"status":%d,"detail":%q}`, text, s, said),
				class: class, said: []string{said}},
			errMapHTTPAnswer{name: fmt.Sprintf("%d/text", s), status: s, contentType: "text/plain; charset=utf-8",
				body: said + "\n", class: class, said: []string{said}},
			errMapHTTPAnswer{name: fmt.Sprintf("%d/html", s), status: s, contentType: "text/html; charset=utf-8",
				body:  fmt.Sprintf("<!DOCTYPE html>\n<html><head><title>%d %s</title></head><body><h1>%d %s</h1><hr><center>nginx</center></body></html>\n", s, text, s, text),
				class: class, said: []string{fmt.Sprintf("%d %s", s, text)}},
			errMapHTTPAnswer{name: fmt.Sprintf("%d/empty", s), status: s, class: class},
			// Not recognised codes (docs/errors.md): a vendor's own numeric code beside other
			// keys, and a code name that is not an exact Connect name. The status decides.
			errMapHTTPAnswer{name: fmt.Sprintf("%d/vendor-json", s), status: s, contentType: "application/json",
				body: `{"code":5,"message":"` + said + `","requestId":"r-1"}`, class: class, said: []string{said}},
			errMapHTTPAnswer{name: fmt.Sprintf("%d/connect-upper-case", s), status: s, contentType: "application/json",
				body: `{"code":"NOT_FOUND","message":"` + said + `"}`, class: class, said: []string{said}},
		)
	}
	for _, c := range errMapConnectCodes {
		out = append(out, errMapHTTPAnswer{name: fmt.Sprintf("%d/connect-%s", c.status, c.name), status: c.status,
			contentType: "application/json", body: `{"code":"` + c.name + `","message":"` + said + `"}`,
			class: c.class, coded: true, said: []string{said}})
	}
	out = append(out, errMapHTTPAnswer{name: "200", status: 200, contentType: "application/json", body: "{}"})
	return out
}

// errMapRESTBackend serves appliance on 127.0.0.1 and returns a gateway connection in front of
// a rest backend called "appliance" for it, with short retries.
func errMapRESTBackend(t *testing.T, appliance *errMapAppliance) *grpc.ClientConn {
	t.Helper()
	hs := httptest.NewServer(appliance) // on 127.0.0.1
	t.Cleanup(hs.Close)
	be, err := rest.New("appliance", rest.Config{
		URLs:           []string{hs.URL},
		Retry:          rest.Retry{MaxAttempts: 2, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
		RequestTimeout: 5 * time.Second,
		// The table drives one failure after another: no circuit breaker or retry budget.
		Breaker: backends.BreakerConfig{Disable: true},
		Budget:  backends.BudgetConfig{Disable: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return errMapGateway(t, "appliance", be)
}

// TestErrorMappingREST drives the gateway in front of a real rest backend whose appliance
// answers each HTTP status with each body form, and checks what the caller gets for each RPC.
func TestErrorMappingREST(t *testing.T) {
	appliance := &errMapAppliance{}
	conn := errMapRESTBackend(t, appliance)

	answers := errMapHTTPAnswers()
	for _, rpc := range errMapRPCs {
		t.Run(rpc.method[strings.LastIndex(rpc.method, "/")+1:], func(t *testing.T) {
			for _, a := range answers {
				t.Run(a.name, func(t *testing.T) {
					appliance.answer(a.status, a.contentType, a.body)
					want := codes.OK
					if a.class != "" {
						want = errMapWant(rpc.method, a.class)
					}
					errMapCall(t, conn, rpc, want, "appliance", a.said...)

					hits, paths := appliance.seen()
					if len(paths) == 0 || paths[0] != "POST "+rpc.method {
						t.Errorf("the appliance got %v, want POST %s", paths, rpc.method)
					}
					switch {
					case a.coded:
					case errMapRetried[a.status] && hits != 2:
						t.Errorf("HTTP %d sent %d times, want 2 (retried once, as configured)", a.status, hits)
					case errMapNeverRetried[a.status] && hits != 1:
						t.Errorf("HTTP %d sent %d times, want 1 (never retried)", a.status, hits)
					}
				})
			}
		})
	}
}
