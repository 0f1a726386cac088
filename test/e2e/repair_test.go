package e2e

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/grpc"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy"
	"github.com/csi-gateway/csi-gateway/redact"
)

// This file shows what a caller gets when a real gRPC driver fails a call, under each repair
// setting (proxy.Repair), for every RPC with error rules of its own in docs/errors.md.

const repairCanary = "CANARY-repair-5e1d-pw"

// repairRPC is an RPC with rules of its own in docs/errors.md, and a request for it; secret
// is true when the request carries repairCanary as a secret value.
type repairRPC struct {
	method string
	req    proto.Message
	secret bool
}

func repairRPCs() []repairRPC {
	secrets := map[string]string{"password": repairCanary}
	return []repairRPC{
		{"/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: secrets}, true},
		{"/csi.v1.Controller/DeleteSnapshot", &csi.DeleteSnapshotRequest{SnapshotId: "snap-1", Secrets: secrets}, true},
		{"/csi.v1.GroupController/DeleteVolumeGroupSnapshot", &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "gs-1", SnapshotIds: []string{"snap-1"}, Secrets: secrets}, true},
		{"/volumegroup.Controller/DeleteVolumeGroup", &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: "vg-1", Secrets: secrets}, true},
		{"/csi.v1.Node/NodeUnstageVolume", &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging/vol-1"}, false},
		{"/csi.v1.Node/NodeUnpublishVolume", &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/target/vol-1"}, false},
		{"/csi.v1.Controller/ControllerUnpublishVolume", &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1", Secrets: secrets}, true},
		{"/csi.v1.Identity/Probe", &csi.ProbeRequest{}, false},
	}
}

// repairTable is docs/errors.md's table of RPC rules, transcribed: under a setting, the code
// the caller gets when the driver answers code for method; a (method, code) not listed
// reaches the caller as the driver's code (plugin: as the code's class's plain code).
var repairTable = map[proxy.Repair]map[string]map[codes.Code]codes.Code{
	proxy.RepairPlugin: {
		"/csi.v1.Controller/DeleteVolume":                   {codes.NotFound: codes.OK},
		"/csi.v1.Controller/DeleteSnapshot":                 {codes.NotFound: codes.OK},
		"/csi.v1.GroupController/DeleteVolumeGroupSnapshot": {codes.NotFound: codes.OK},
		"/volumegroup.Controller/DeleteVolumeGroup":         {codes.NotFound: codes.OK},
		"/csi.v1.Node/NodeUnstageVolume":                    {codes.NotFound: codes.OK},
		"/csi.v1.Node/NodeUnpublishVolume":                  {codes.NotFound: codes.OK},
		"/csi.v1.Controller/ControllerUnpublishVolume":      {codes.NotFound: codes.OK},
		"/csi.v1.Identity/Probe":                            {codes.Unavailable: codes.FailedPrecondition, codes.DeadlineExceeded: codes.FailedPrecondition},
	},
	proxy.RepairSpec: {
		"/csi.v1.Controller/DeleteVolume":                   {codes.NotFound: codes.OK},
		"/csi.v1.Controller/DeleteSnapshot":                 {codes.NotFound: codes.OK},
		"/csi.v1.GroupController/DeleteVolumeGroupSnapshot": {codes.NotFound: codes.OK},
		"/volumegroup.Controller/DeleteVolumeGroup":         {codes.NotFound: codes.OK},
	},
	proxy.RepairNone: {},
}

// repairWant is what the caller gets under setting when the driver answers code for method.
func repairWant(setting proxy.Repair, method string, code codes.Code) codes.Code {
	if want, ok := repairTable[setting][method][code]; ok {
		return want
	}
	if setting == proxy.RepairPlugin {
		return backends.ClassFromCode(code).Code() // UNKNOWN and DATA_LOSS are INTERNAL
	}
	return code
}

// repairDriver fails every call with the code it is set to, a message that echoes the
// request's secret, and a status detail.
type repairDriver struct {
	mu   sync.Mutex
	code codes.Code
}

func (d *repairDriver) set(c codes.Code) {
	d.mu.Lock()
	d.code = c
	d.mu.Unlock()
}

func (d *repairDriver) answer(_ context.Context, c *driverCall, _ func([]byte) error) error {
	d.mu.Lock()
	code := d.code
	d.mu.Unlock()
	st, err := status.New(code, "the driver refused "+c.Method+" with password "+repairCanary).
		WithDetails(&errdetails.ErrorInfo{Reason: "DRIVER_REFUSED", Domain: "driver.example"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// repairRecords keeps the gateway's call records.
type repairRecords struct {
	mu   sync.Mutex
	recs []proxy.CallRecord
}

func (r *repairRecords) Observe(rec proxy.CallRecord) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func (r *repairRecords) last() proxy.CallRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) == 0 {
		return proxy.CallRecord{}
	}
	return r.recs[len(r.recs)-1]
}

// repairGateway serves a proxy.Server with every method routed to a grpc backend for the
// driver at endpoint, under setting, and returns a client connection to it and its metrics.
func repairGateway(t *testing.T, endpoint string, setting proxy.Repair, validation proxy.ValidationMode, obs proxy.CallObserver, logTo *testutil.SyncBuffer) (*grpc.ClientConn, *proxy.Metrics) {
	t.Helper()
	be, err := grpcbackend.New("driver", grpcbackend.Config{Target: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	metrics := proxy.NewMetrics("", prometheus.NewRegistry())
	srv, err := proxy.NewServer(proxy.Options{
		Routes:     []proxy.Route{{Methods: []string{"*"}, Backend: "driver"}},
		Backends:   map[string]backends.Backend{"driver": be},
		Repairs:    map[string]proxy.Repair{"driver": setting},
		Log:        slog.New(slog.NewJSONHandler(logTo, nil)),
		Observers:  []proxy.CallObserver{obs},
		Validation: validation,
		Metrics:    metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := serveOnSocket(t, srv)
	return conn, metrics
}

// TestRepairSettings: for every RPC with rules of its own, a driver answering each non-OK
// code, under each repair setting: the caller gets repairTable's code; under none, the
// driver's status exactly (its message and details), its secret scrubbed; whenever the code
// differs, the call record and the log line carry the driver's code beside it.
func TestRepairSettings(t *testing.T) {
	d := &repairDriver{}
	driver := startTestDriver(t, t.TempDir(), "driver.sock", d.answer)
	for _, setting := range []proxy.Repair{proxy.RepairPlugin, proxy.RepairSpec, proxy.RepairNone} {
		t.Run(string(setting), func(t *testing.T) {
			recs := &repairRecords{}
			logs := &testutil.SyncBuffer{}
			conn, _ := repairGateway(t, driver.Endpoint, setting, proxy.ValidationOff, recs, logs)
			for _, rpc := range repairRPCs() {
				for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
					d.set(code)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err := invoke(ctx, conn, rpc.method, rpc.req)
					cancel()
					want := repairWant(setting, rpc.method, code)
					what := rpc.method + " answered " + code.String()
					st := status.Convert(err)
					if st.Code() != want {
						t.Errorf("%s: caller got %v (%q), want %v", what, st.Code(), st.Message(), want)
						continue
					}
					rec, line := recs.last(), logs.Take()
					if rpc.secret && (strings.Contains(line, repairCanary) || strings.Contains(rec.Message+rec.BackendMessage, repairCanary)) {
						t.Errorf("%s: the request's secret reached the log or the call record", what)
					}
					if want != code && (rec.BackendCode != code.String() || !strings.Contains(line, `"backend_code":"`+code.String()+`"`)) {
						t.Errorf("%s: answered %v, but the record (backend_code %q) or the log line (%s) lacks the driver's code", what, want, rec.BackendCode, line)
					}
					if want == codes.OK {
						continue
					}
					if rpc.secret && strings.Contains(st.Message(), repairCanary) {
						t.Errorf("%s: the message %q holds the request's secret", what, st.Message())
					}
					switch setting {
					case proxy.RepairNone:
						wantMsg := "the driver refused " + rpc.method + " with password " + repairCanary
						if rpc.secret {
							wantMsg = strings.ReplaceAll(wantMsg, repairCanary, redact.ScrubbedValue)
						}
						if st.Message() != wantMsg || len(st.Details()) != 1 {
							t.Errorf("%s: got %q with %d details, want the driver's status exactly: %q and its detail", what, st.Message(), len(st.Details()), wantMsg)
						}
					case proxy.RepairSpec:
						if !strings.HasPrefix(st.Message(), "the driver refused") || len(st.Details()) != 0 {
							t.Errorf("%s: got %q with %d details, want the driver's message, unprefixed, and no details", what, st.Message(), len(st.Details()))
						}
					default:
						if !strings.HasPrefix(st.Message(), `backend "driver": `) || len(st.Details()) != 0 {
							t.Errorf("%s: got %q with %d details, want the message naming the backend and no details", what, st.Message(), len(st.Details()))
						}
					}
				}
			}
		})
	}
}

// TestRepairDefaultUnpublishNotFound: under grpc's default setting (spec), NOT_FOUND from the
// driver on ControllerUnpublishVolume, NodeUnpublishVolume and NodeUnstageVolume reaches the
// caller; DeleteVolume's becomes OK, and the record and the log show NOT_FOUND beside OK.
func TestRepairDefaultUnpublishNotFound(t *testing.T) {
	d := &repairDriver{}
	d.set(codes.NotFound)
	driver := startTestDriver(t, t.TempDir(), "driver.sock", d.answer)
	recs := &repairRecords{}
	logs := &testutil.SyncBuffer{}
	conn, metrics := repairGateway(t, driver.Endpoint, proxy.DefaultRepair("grpc"), proxy.ValidationOff, recs, logs)
	for _, rpc := range repairRPCs() {
		want := codes.NotFound
		switch rpc.method {
		case "/csi.v1.Controller/DeleteVolume":
			want = codes.OK
		case "/csi.v1.Controller/ControllerUnpublishVolume", "/csi.v1.Node/NodeUnpublishVolume", "/csi.v1.Node/NodeUnstageVolume":
		default:
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := invoke(ctx, conn, rpc.method, rpc.req)
		cancel()
		if got := status.Code(err); got != want {
			t.Errorf("%s: caller got %v, want %v", rpc.method, got, want)
		}
		rec, line := recs.last(), logs.Take()
		if want == codes.OK {
			if rec.CodeName != "OK" || rec.BackendCode != "NotFound" || !strings.Contains(line, `"code":"OK"`) || !strings.Contains(line, `"backend_code":"NotFound"`) {
				t.Errorf("%s: record %+v, log %s: want both OK and the driver's NotFound", rpc.method, rec, line)
			}
		} else if rec.CodeName != "NotFound" || slices.Contains(rec.Repairs, "code") {
			// Only the driver's status details (which the spec forbids) were dropped.
			t.Errorf("%s: the code passed unchanged, yet the record (%+v) shows another or a code repair", rpc.method, rec)
		}
	}
	// One code repair (DeleteVolume), and the four drivers' details dropped, on /metrics.
	srv := httptest.NewServer(metrics.Handler())
	defer srv.Close()
	fams := scrapeMetrics(t, srv.URL)
	code := metricSeries(fams, "csigw_repairs_total", map[string]string{"backend": "driver", "method_name": "/csi.v1.Controller/DeleteVolume", "kind": "code"})
	details := metricSeries(fams, "csigw_repairs_total", map[string]string{"backend": "driver", "method_name": "/csi.v1.Node/NodeUnstageVolume", "kind": "details"})
	if code.GetCounter().GetValue() != 1 || details.GetCounter().GetValue() != 1 {
		t.Errorf("csigw_repairs_total: DeleteVolume code %v, NodeUnstageVolume details %v; want 1 each", code, details)
	}
}

// TestCapabilityFetchCarriesNoCallerMetadata: the ControllerGetCapabilities call the gateway
// makes to validate a caller's call carries none of that caller's metadata.
func TestCapabilityFetchCarriesNoCallerMetadata(t *testing.T) {
	driver := startTestDriver(t, t.TempDir(), "driver.sock", func(_ context.Context, c *driverCall, send func([]byte) error) error {
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
	conn, _ := repairGateway(t, driver.Endpoint, proxy.RepairSpec, proxy.ValidationEnforce, &repairRecords{}, &testutil.SyncBuffer{})
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-caller-canary", "CANARY-caller-md", "traceparent", traceparent)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := invoke(ctx, conn, "/csi.v1.Controller/ControllerUnpublishVolume", &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1"}); err != nil {
		t.Fatal(err)
	}
	fetches := driver.Calls("/csi.v1.Controller/ControllerGetCapabilities")
	if len(fetches) == 0 {
		t.Fatal("the gateway fetched no capabilities")
	}
	for _, f := range fetches {
		if v := f.MD.Get("x-caller-canary"); len(v) != 0 {
			t.Errorf("the capabilities fetch carries the caller's x-caller-canary: %v", v)
		}
		if v := f.MD.Get("traceparent"); len(v) != 0 && strings.Contains(v[0], "4bf92f3577b34da6a3ce929d0e0e4736") {
			t.Errorf("the capabilities fetch carries the caller's trace: %v", v)
		}
	}
	// The caller's own call does carry them: the driver sees what it always saw.
	if c := driver.Calls("/csi.v1.Controller/ControllerUnpublishVolume"); len(c) != 1 || len(c[0].MD.Get("x-caller-canary")) != 1 {
		t.Errorf("the caller's call did not reach the driver with its metadata: %v", c)
	}
}
