package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// shutdownResult is how one CreateVolume call made before SIGTERM ended.
type shutdownResult struct {
	name string
	resp *csi.CreateVolumeResponse
	err  error
	took time.Duration
}

// startCreates starts n CreateVolume calls through conn, each in its own goroutine.
func startCreates(conn *grpc.ClientConn, n int) <-chan shutdownResult {
	results := make(chan shutdownResult, n)
	for i := range n {
		go func() {
			name := fmt.Sprintf("drain-%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			resp, err := csi.NewControllerClient(conn).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name,
				VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
			results <- shutdownResult{name: name, resp: resp, err: err, took: time.Since(start)}
		}()
	}
	return results
}

// slowCreate is a driver whose CreateVolume takes at least d and, when gate is not nil, also
// waits for gate to close; it answers with the volume named in the request, and stops early
// when its call is cancelled.
func slowCreate(d time.Duration, gate <-chan struct{}) driverFunc {
	return func(ctx context.Context, c *driverCall, send func([]byte) error) error {
		if c.Method != "/csi.v1.Controller/CreateVolume" {
			return nil
		}
		var req csi.CreateVolumeRequest
		if err := proto.Unmarshal(c.Request, &req); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		return send(marshal(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "id-" + req.GetName()}}))
	}
}

// TestGatewayShutdownDrains sends SIGTERM to the gateway binary while five CreateVolume calls
// are in flight on a driver that takes 1.5 s: every call completes OK, no new connection is
// accepted once the signal is in, and the process exits 0 and removes its socket.
func TestGatewayShutdownDrains(t *testing.T) {
	dir := t.TempDir()
	// The driver takes 1.5 s and, besides, holds its answers until the test has seen the
	// gateway refuse a new connection, so that check happens with all five calls in flight
	// however loaded the machine is.
	gate := make(chan struct{})
	driver := startTestDriver(t, dir, "driver.sock", slowCreate(1500*time.Millisecond, gate))
	gw := startGatewayWith(t, dir, noValidation+fmt.Sprintf(`backends:
  driver: {type: grpc, target: %q}
routes:
  - {methods: ["*"], backend: driver}
shutdown: {grace: 10s}
`, driver.Endpoint))

	const n = 5
	results := startCreates(gw.Conn, n)
	driver.waitArrivals(t, n, 30*time.Second)
	signalled := time.Now()
	if err := gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// New connections are refused: the socket goes away and nothing answers there.
	refusedAfter := waitRefused(t, gw, 20*time.Second)
	fresh, err := grpc.NewClient(gw.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = csi.NewIdentityClient(fresh).Probe(pctx, &csi.ProbeRequest{})
	pcancel()
	checkStatus(t, "Probe on a new connection while draining", err, codes.Unavailable)
	select {
	case r := <-results:
		t.Fatalf("%s ended before the driver answered: %v", r.name, r.err)
	default:
	}
	close(gate)

	for range n {
		r := <-results
		if r.err != nil {
			t.Errorf("%s, in flight at SIGTERM: %v", r.name, r.err)
		} else if r.resp.GetVolume().GetVolumeId() != "id-"+r.name {
			t.Errorf("%s: got volume %v", r.name, r.resp.GetVolume())
		}
		if r.took < 1500*time.Millisecond {
			t.Errorf("%s answered after %v, before the driver's 1.5 s", r.name, r.took)
		}
	}
	if err := gw.Wait(30 * time.Second); err != nil {
		t.Fatalf("the gateway after SIGTERM: %v\n%s", err, gw.Output())
	}
	exitedAfter := time.Since(signalled)
	if _, err := os.Lstat(gw.Socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is still there after exit: %v", err)
	}
	t.Logf("SIGTERM with %d calls in flight: new connections refused after %v, exit 0 after %v",
		n, refusedAfter.Round(time.Millisecond), exitedAfter.Round(time.Millisecond))
}

// TestGatewayShutdownCutsOff sends SIGTERM with a grace of 1 s while calls run on a driver
// that takes 5 s: the calls are cut off with a non-OK code, the driver's calls are cancelled,
// and the process exits soon after the grace period.
func TestGatewayShutdownCutsOff(t *testing.T) {
	dir := t.TempDir()
	driver := startTestDriver(t, dir, "driver.sock", slowCreate(5*time.Second, nil))
	gw := startGatewayWith(t, dir, noValidation+fmt.Sprintf(`backends:
  driver: {type: grpc, target: %q}
routes:
  - {methods: ["*"], backend: driver}
shutdown: {grace: 1s}
`, driver.Endpoint))

	const n = 3
	results := startCreates(gw.Conn, n)
	arrived := driver.waitArrivals(t, n, 30*time.Second)
	signalled := time.Now()
	if err := gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range n {
		r := <-results
		if c := status.Code(r.err); c != codes.Canceled && c != codes.Unavailable {
			t.Errorf("%s, cut off by the end of the grace period: %v; want CANCELLED or UNAVAILABLE", r.name, r.err)
		}
		t.Logf("%s: %v after %v", r.name, r.err, r.took.Round(time.Millisecond))
	}
	err := gw.Wait(20 * time.Second)
	exitedAfter := time.Since(signalled)
	if err != nil && !exited(gw.Process) {
		t.Fatalf("the gateway still runs 20s after SIGTERM with a 1s grace:\n%s", gw.Output())
	}
	if err != nil {
		t.Errorf("the gateway exited with %v after cutting calls off at the end of its grace period, want 0", err)
	}
	for _, c := range arrived {
		select {
		case <-c.ended:
			if !c.canceled {
				t.Errorf("the driver's call ended without being cancelled")
			}
		case <-time.After(20 * time.Second):
			t.Errorf("the driver's call was not cancelled")
		}
	}
	if _, err := os.Lstat(gw.Socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is still there after exit: %v", err)
	}
	t.Logf("SIGTERM with %d calls on a 5 s driver, grace 1s: exit after %v", n, exitedAfter.Round(time.Millisecond))
}

// waitRefused waits until a new connection to the gateway's socket fails and returns how long
// after the call that took.
func waitRefused(t *testing.T, gw *gatewayProc, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		c, err := net.Dial("unix", gw.Socket)
		if err != nil {
			return time.Since(start)
		}
		c.Close()
		if time.Since(start) > timeout {
			t.Fatalf("the gateway still accepts connections %v after SIGTERM:\n%s", timeout, gw.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
