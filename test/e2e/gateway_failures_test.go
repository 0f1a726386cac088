package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestGatewayFailures runs one gateway binary in front of backends that are down, too slow or
// answering garbage, each reached by its own method, and checks the exact code and a useful
// message for each; then that the same process still serves a healthy backend.
func TestGatewayFailures(t *testing.T) {
	dir := t.TempDir()

	// A grpc driver that answers only after the caller has given up.
	slow := startTestDriver(t, dir, "slow.sock", func(ctx context.Context, c *driverCall, send func([]byte) error) error {
		if c.Method != "/csi.v1.Controller/ControllerGetVolume" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return send(marshal(&csi.ControllerGetVolumeResponse{Volume: &csi.Volume{VolumeId: "late"}}))
		}
	})
	// An appliance that answers 200 with a body that is not JSON.
	var garbageHits atomic.Int32
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		garbageHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "<<this is not JSON>> \x00\x01")
	}))
	t.Cleanup(garbage.Close)
	// An appliance that is overloaded on every call.
	var busyHits atomic.Int32
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		busyHits.Add(1)
		http.Error(w, "appliance overloaded, try later", http.StatusServiceUnavailable)
	}))
	t.Cleanup(busy.Close)

	const busyAttempts = 3
	gw := startGatewayWith(t, dir, noValidation+fmt.Sprintf(`backends:
  down: {type: grpc, target: "unix://%s"}
  refused: {type: rest, urls: [%q], retry: {maxAttempts: 3, minBackoff: 20ms, maxBackoff: 100ms}}
  slow: {type: grpc, target: %q}
  garbage: {type: rest, urls: [%q]}
  busy: {type: rest, urls: [%q], retry: {maxAttempts: %d, minBackoff: 20ms, maxBackoff: 100ms}}
  healthy: {type: embedded, dataDir: %q}
routes:
  - {methods: ["/csi.v1.Controller/ControllerPublishVolume"], backend: down}
  - {methods: ["/csi.v1.Controller/ListVolumes"], backend: refused}
  - {methods: ["/csi.v1.Controller/ControllerGetVolume"], backend: slow}
  - {methods: ["/csi.v1.Controller/ControllerExpandVolume"], backend: garbage}
  - {methods: ["/csi.v1.Controller/CreateSnapshot"], backend: busy}
  - {methods: ["*"], backend: healthy}
`, filepath.Join(dir, "no-driver-here.sock"), "http://"+closedLoopbackAddr(t), slow.Endpoint, garbage.URL, busy.URL, busyAttempts,
		filepath.Join(dir, "data")))
	ctl := csi.NewControllerClient(gw.Conn)

	cases := []struct {
		name     string
		call     func(ctx context.Context) error
		timeout  time.Duration
		code     codes.Code
		contains []string // in the message
	}{{
		name: "grpc backend whose socket does not exist",
		call: func(ctx context.Context) error {
			_, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v1", NodeId: "n1",
				VolumeCapability: mountCapability()})
			return err
		},
		timeout: 20 * time.Second, code: codes.Unavailable,
		contains: []string{`"down"`, "no-driver-here.sock", "check backends.down.target"},
	}, {
		name: "rest backend at a loopback port nobody listens on",
		call: func(ctx context.Context) error {
			_, err := ctl.ListVolumes(ctx, &csi.ListVolumesRequest{})
			return err
		},
		timeout: 20 * time.Second, code: codes.Unavailable,
		contains: []string{`"refused"`, "backends.refused.urls"},
	}, {
		name: "grpc driver slower than the caller's deadline",
		call: func(ctx context.Context) error {
			_, err := ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "v1"})
			return err
		},
		timeout: 2 * time.Second, code: codes.DeadlineExceeded,
	}, {
		name: "appliance answering 200 with a body that is not JSON",
		call: func(ctx context.Context) error {
			_, err := ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "v1",
				CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20}})
			return err
		},
		timeout: 20 * time.Second, code: codes.Internal,
		contains: []string{`"garbage"`},
	}, {
		name: "appliance answering 503 to every call",
		call: func(ctx context.Context) error {
			_, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: "v1", Name: "snap1"})
			return err
		},
		timeout: 20 * time.Second, code: codes.Unavailable,
		contains: []string{`"busy"`, "503"},
	}}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
		start := time.Now()
		err := tc.call(ctx)
		took := time.Since(start)
		cancel()
		st := checkStatus(t, tc.name, err, tc.code)
		for _, want := range tc.contains {
			if !strings.Contains(st.Message(), want) {
				t.Errorf("%s: the message %q does not contain %s", tc.name, st.Message(), want)
			}
		}
		t.Logf("%s: %s %q after %v", tc.name, st.Code(), st.Message(), took.Round(time.Millisecond))
	}

	// The slow driver saw the deadline and was cancelled when it passed, so it did not keep
	// working for a caller that had gone.
	if calls := slow.Calls("/csi.v1.Controller/ControllerGetVolume"); len(calls) != 1 {
		t.Errorf("the slow driver received %d calls, want 1", len(calls))
	} else {
		c := calls[0]
		if c.Deadline.IsZero() {
			t.Errorf("the slow driver saw no deadline")
		}
		select {
		case <-c.ended:
			if !c.canceled {
				t.Errorf("the slow driver's call ended without being cancelled")
			}
		case <-time.After(20 * time.Second):
			t.Errorf("the slow driver's call was not cancelled within 20s of the caller's deadline")
		}
	}
	// The gateway logged the call as ended by the caller. Which code it logs depends on a
	// race it cannot see: the caller's clock runs out a moment before the gateway's copy of
	// the deadline (sent as grpc-timeout), so the caller's RST_STREAM usually arrives first
	// and the gateway logs CANCELLED; on other runs its own timer wins and it logs
	// DEADLINE_EXCEEDED. Either way the caller got DEADLINE_EXCEEDED, checked above.
	waitOutput(t, gw.Process, `"method":"ControllerGetVolume","code":"`, 20*time.Second)
	for _, l := range callLines(t, gw.Output())["ControllerGetVolume"] {
		if c := l["code"]; c != "DeadlineExceeded" && c != "Canceled" {
			t.Errorf("the gateway logged the slow call with code %v, want DeadlineExceeded (or Canceled)", c)
		}
	}
	if n := busyHits.Load(); n != busyAttempts {
		t.Errorf("the 503 appliance was called %d times, want %d (retries.maxAttempts)", n, busyAttempts)
	}
	if n := garbageHits.Load(); n != 1 {
		t.Errorf("the appliance answering garbage was called %d times, want 1 (a 200 is not retried)", n)
	}

	// The same process still serves: CreateVolume on the embedded backend.
	if exited(gw.Process) {
		t.Fatalf("the gateway exited:\n%s", gw.Output())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "after-failures",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
	if err != nil {
		t.Fatalf("CreateVolume on the healthy backend after the failures: %v\n%s", err, gw.Output())
	}
	if resp.GetVolume().GetVolumeId() == "" || resp.GetVolume().GetCapacityBytes() < 1<<20 {
		t.Errorf("CreateVolume on the healthy backend: %v", resp)
	}
	if strings.Contains(gw.Output(), "panic") {
		t.Errorf("the gateway logged a panic:\n%s", gw.Output())
	}
}

// mountCapability is a plain single-writer filesystem capability.
func mountCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// closedLoopbackAddr returns a loopback address on which nothing listens: a port the kernel
// just handed out and that was closed again.
func closedLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
