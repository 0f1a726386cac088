package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// This file holds what faults_test.go needs: the real appliance binary killed and restarted on
// one data directory, a mixed CSI load that records every call's outcome, and the appliance's
// own record of what it holds, read behind the gateway's back.

// faultAppliance is the appliance binary on one data directory, gRPC socket and (for the REST
// path) HTTP port, all kept across restarts.
type faultAppliance struct {
	t        *testing.T
	data     string // the data directory
	endpoint string // unix:///.../appliance.sock
	httpAddr string // 127.0.0.1:PORT, or "" without --http
	proc     *testutil.Process
	conn     *grpc.ClientConn // to the appliance's own socket, not through the gateway
	starts   int
}

// startFaultAppliance starts the appliance in dir (with --http when withHTTP) and waits until
// it answers.
func startFaultAppliance(t *testing.T, dir string, withHTTP bool) *faultAppliance {
	t.Helper()
	a := &faultAppliance{t: t, data: filepath.Join(dir, "data"), endpoint: "unix://" + filepath.Join(dir, "appliance.sock")}
	if withHTTP {
		a.httpAddr = testutil.FreeAddr(t)
	}
	a.start()
	return a
}

// start runs the appliance and waits until Probe answers OK on its socket and, with --http,
// its HTTP port accepts connections. It fails the test, with the appliance's output, when the
// process exits or 30 s pass first.
func (a *faultAppliance) start() {
	t := a.t
	t.Helper()
	args := []string{"appliance", "--data", a.data, "--endpoint", a.endpoint}
	if a.httpAddr != "" {
		args = append(args, "--http", a.httpAddr)
	}
	a.proc = testutil.Start(t, args...)
	a.starts++
	if a.conn != nil {
		a.conn.Close()
	}
	// The test's own connection retries every 10–100 ms, not after grpc's default 1 s, so the
	// appliance is seen up as soon as it is.
	conn, err := grpc.NewClient(a.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond},
			MinConnectTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	a.conn = conn
	t.Cleanup(func() { conn.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil && a.httpAddr != "" {
			var c net.Conn
			if c, err = net.Dial("tcp", a.httpAddr); err == nil {
				c.Close()
			}
		}
		if err == nil {
			return
		}
		if exited(a.proc) || time.Now().After(deadline) {
			t.Fatalf("the appliance (start %d) did not come up: %v\noutput:\n%s", a.starts, err, a.proc.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (a *faultAppliance) kill() { a.proc.Kill() }

// controller is the appliance's own Controller service, reached on its socket.
func (a *faultAppliance) controller() csi.ControllerClient { return csi.NewControllerClient(a.conn) }

// applianceRecords is what the appliance's state file says it holds: volumes and snapshots by
// ID. CSI does not report names, so the names are read from the file the appliance replaces
// atomically on every change (a reader sees one whole state).
type applianceRecords struct {
	Volumes map[string]struct {
		ID           string         `json:"id"`
		Name         string         `json:"name"`
		Publications map[string]any `json:"publications"`
	} `json:"volumes"`
	Snapshots map[string]struct {
		ID             string `json:"id"`
		Name           string `json:"name"`
		SourceVolumeID string `json:"sourceVolumeId"`
	} `json:"snapshots"`
}

func readApplianceRecords(t *testing.T, data string) applianceRecords {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r applianceRecords
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("the appliance's state file: %v", err)
	}
	return r
}

// volumeIDsByName returns every volume ID of each name, so that a duplicate shows.
func (r applianceRecords) volumeIDsByName() map[string][]string {
	out := map[string][]string{}
	for id, v := range r.Volumes {
		out[v.Name] = append(out[v.Name], id)
	}
	return out
}

// snapshotIDsByName returns every snapshot ID of each name.
func (r applianceRecords) snapshotIDsByName() map[string][]string {
	out := map[string][]string{}
	for id, s := range r.Snapshots {
		out[s.Name] = append(out[s.Name], id)
	}
	return out
}

// The operations of the load, named as the CSI methods they call.
const (
	opCreateVolume = "CreateVolume"
	opDeleteVolume = "DeleteVolume"
	opSnapshot     = "CreateSnapshot"
	opPublish      = "ControllerPublishVolume"
	opUnpublish    = "ControllerUnpublishVolume"
	opList         = "ListVolumes"
)

// faultCall is one call of the load and how it ended.
type faultCall struct {
	Op     string
	Worker int
	Name   string // the name CreateVolume or CreateSnapshot asked for
	VolID  string // the volume the call was about, or the one CreateVolume returned
	SnapID string // the snapshot CreateSnapshot returned
	Code   codes.Code
	Msg    string
	Start  time.Time
	Took   time.Duration
}

// faultLoad is a mixed CSI load through the gateway: workers that each create volumes, delete
// some of them, snapshot and publish/unpublish the others, and list, one call at a time,
// every call with its own deadline. Each worker touches only volumes it created, so no two
// calls of the load ever conflict on a volume. After a failed call a worker backs off, as a
// CO does (50 ms, doubled per further failure, at most 800 ms), so that an outage does not
// turn into thousands of calls.
type faultLoad struct {
	ctl      csi.ControllerClient
	prefix   string
	deadline time.Duration // of each call
	node     string        // the node volumes are published to

	issued, answered, oks atomic.Int64

	mu    sync.Mutex
	calls []faultCall

	stop chan struct{}
	done chan struct{} // closed when every worker has returned
}

// startFaultLoad starts workers issuing calls through conn until halt.
func startFaultLoad(conn *grpc.ClientConn, prefix string, workers int, deadline time.Duration, seed uint64) *faultLoad {
	l := &faultLoad{ctl: csi.NewControllerClient(conn), prefix: prefix, deadline: deadline, node: "node-1",
		stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(w, rand.New(rand.NewPCG(seed, uint64(w))))
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	return l
}

func (l *faultLoad) worker(w int, rnd *rand.Rand) {
	var keep, deletable []string // IDs of volumes this worker created with an OK answer
	var pause time.Duration      // after a failure: 50 ms, doubled while failures go on, at most 800 ms
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		failed := false
		switch r := rnd.IntN(100); {
		case r < 40 || len(keep) == 0:
			name := fmt.Sprintf("%s-w%d-v%04d", l.prefix, w, i)
			c := l.call(faultCall{Op: opCreateVolume, Worker: w, Name: name}, func(ctx context.Context) (string, error) {
				resp, err := l.ctl.CreateVolume(ctx, volumeRequest(name))
				return resp.GetVolume().GetVolumeId(), err
			})
			switch {
			case c.Code != codes.OK:
				failed = true
			case rnd.IntN(3) == 0:
				deletable = append(deletable, c.VolID)
			default:
				keep = append(keep, c.VolID)
			}
		case r < 55 && len(deletable) > 0:
			id := deletable[0]
			deletable = deletable[1:] // a failed delete is retried after the load, as a CO would
			c := l.call(faultCall{Op: opDeleteVolume, Worker: w, VolID: id}, func(ctx context.Context) (string, error) {
				_, err := l.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
				return "", err
			})
			failed = c.Code != codes.OK
		case r < 70:
			id, name := keep[rnd.IntN(len(keep))], fmt.Sprintf("%s-w%d-s%04d", l.prefix, w, i)
			c := l.call(faultCall{Op: opSnapshot, Worker: w, Name: name, VolID: id}, func(ctx context.Context) (string, error) {
				resp, err := l.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: id})
				return resp.GetSnapshot().GetSnapshotId(), err
			})
			failed = c.Code != codes.OK
		case r < 85:
			id := keep[rnd.IntN(len(keep))]
			c := l.call(faultCall{Op: opPublish, Worker: w, VolID: id}, func(ctx context.Context) (string, error) {
				_, err := l.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: l.node,
					VolumeCapability: mountCapability()})
				return "", err
			})
			u := l.call(faultCall{Op: opUnpublish, Worker: w, VolID: id}, func(ctx context.Context) (string, error) {
				_, err := l.ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: l.node})
				return "", err
			})
			failed = c.Code != codes.OK || u.Code != codes.OK
		default:
			c := l.call(faultCall{Op: opList, Worker: w}, func(ctx context.Context) (string, error) {
				_, err := l.ctl.ListVolumes(ctx, &csi.ListVolumesRequest{})
				return "", err
			})
			failed = c.Code != codes.OK
		}
		if !failed {
			pause = 0
			continue
		}
		pause = min(max(2*pause, 50*time.Millisecond), 800*time.Millisecond)
		select {
		case <-l.stop:
			return
		case <-time.After(pause):
		}
	}
}

// call makes one call with the load's deadline and records it. fn returns the ID the call
// created, if any.
func (l *faultLoad) call(c faultCall, fn func(ctx context.Context) (string, error)) faultCall {
	l.issued.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), l.deadline)
	c.Start = time.Now()
	id, err := fn(ctx)
	c.Took = time.Since(c.Start)
	cancel()
	st := status.Convert(err)
	c.Code, c.Msg = st.Code(), st.Message()
	if err == nil {
		switch c.Op {
		case opCreateVolume:
			c.VolID = id
		case opSnapshot:
			c.SnapID = id
		}
		l.oks.Add(1)
	}
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
	l.answered.Add(1)
	return c
}

// waitOK waits until the load has had more than n OK answers, failing the test after
// timeout with out (the processes' output).
func (l *faultLoad) waitOK(t *testing.T, n int64, timeout time.Duration, out func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for l.oks.Load() <= n {
		if time.Now().After(deadline) {
			t.Fatalf("no call of the load got OK within %v (%d OK so far)\n%s", timeout, l.oks.Load(), out())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// halt stops the workers after their current call and waits for them up to timeout; it
// reports whether they all returned, that is whether every call issued got an answer.
func (l *faultLoad) halt(timeout time.Duration) bool {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	select {
	case <-l.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// recorded returns the calls answered so far.
func (l *faultLoad) recorded() []faultCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]faultCall(nil), l.calls...)
}

// codeFigures counts calls by code: OK, UNAVAILABLE (and how many of those the gateway's
// circuit breaker failed fast), DEADLINE_EXCEEDED and the rest.
type codeFigures struct{ calls, ok, unavailable, circuitOpen, deadline, other int }

func countCodes(calls []faultCall) codeFigures {
	var f codeFigures
	for _, c := range calls {
		f.calls++
		switch c.Code {
		case codes.OK:
			f.ok++
		case codes.Unavailable:
			f.unavailable++
			if strings.Contains(c.Msg, "circuit open") {
				f.circuitOpen++
			}
		case codes.DeadlineExceeded:
			f.deadline++
		default:
			f.other++
		}
	}
	return f
}

func (f codeFigures) String() string {
	return fmt.Sprintf("%d calls: OK %d, UNAVAILABLE %d (circuit open %d), DEADLINE_EXCEEDED %d, other %d",
		f.calls, f.ok, f.unavailable, f.circuitOpen, f.deadline, f.other)
}

// waitServing calls ControllerGetCapabilities (read-only, answered by the appliance) through
// the gateway every 25 ms until it gets OK, and returns how long that took. It fails the test
// after 30 s, with out (the processes' output).
func waitServing(t *testing.T, conn *grpc.ClientConn, out func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := csi.NewControllerClient(conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
		cancel()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the gateway does not serve 30s after the appliance came back: %v\n%s", err, out())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// retryUntilOK makes the call fn again, as a CO does after a transient failure, until it gets
// OK, at most 40 times, backing off from 100 ms to 2 s (longer than the gateway's circuit
// breaker stays open), and returns what it returned and how many attempts it took. A final
// (non-transient) failure, or no OK after 40 attempts, fails the test.
func retryUntilOK(t *testing.T, what string, fn func(ctx context.Context) (string, error)) (string, int) {
	t.Helper()
	const attempts = 40
	var err error
	pause := 100 * time.Millisecond
	for n := 1; n <= attempts; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var id string
		id, err = fn(ctx)
		cancel()
		if err == nil {
			return id, n
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
			t.Errorf("%s, retried after the outages: %v (attempt %d)", what, err, n)
			return "", n
		}
		time.Sleep(pause)
		pause = min(2*pause, 2*time.Second)
	}
	t.Errorf("%s: still failing after %d retries: %v", what, attempts, err)
	return "", attempts
}
