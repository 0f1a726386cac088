package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
	"github.com/csi-gateway/csi-gateway/redact"
)

// serialFake is a backend for the serialization tests. It counts calls by method; a call of
// a gated method announces itself on entered and blocks until its gate opens (or its context
// ends, when it returns the context's error).
type serialFake struct {
	answer  func(method string, req []byte) ([]byte, error)
	entered chan string

	mu    sync.Mutex
	calls map[string]int
	ctxs  []context.Context // the contexts of gated calls, in arrival order
	gates map[string]chan struct{}
}

var _ backends.Backend = (*serialFake)(nil)

func newSerialFake(gated ...string) *serialFake {
	f := &serialFake{entered: make(chan string, 2000), calls: map[string]int{}, gates: map[string]chan struct{}{}}
	for _, m := range gated {
		f.gates[m] = make(chan struct{})
	}
	return f
}

func (f *serialFake) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	backends.CallInfoFrom(ctx).AddAttempt()
	f.mu.Lock()
	f.calls[method]++
	gate := f.gates[method]
	if gate != nil {
		f.ctxs = append(f.ctxs, ctx)
	}
	f.mu.Unlock()
	if gate != nil {
		f.entered <- method
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.answer != nil {
		return f.answer(method, req)
	}
	return nil, nil
}

func (f *serialFake) Stream(context.Context, string, grpc.ServerStream) error {
	return backends.Errorf(backends.ClassUnimplemented, "backend \"fake\": no streams")
}
func (f *serialFake) Ready(context.Context) error { return nil }
func (f *serialFake) Close() error                { return nil }

// open lets the gated calls of method (and every later one) through.
func (f *serialFake) open(method string) { close(f.gates[method]) }

func (f *serialFake) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// ctx returns the context of the i-th gated call.
func (f *serialFake) ctx(i int) context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ctxs[i]
}

// waitEntered waits for n gated calls to reach the backend.
func (f *serialFake) waitEntered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("a gated call never reached the backend")
		}
	}
}

// waiting returns how many callers wait on the flights of key.
func (s *Serializer) waiting(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.objects[key] {
		n += f.waiters
	}
	return n
}

// eventually fails the test unless cond holds within 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

const (
	mCreateVolume    = "/csi.v1.Controller/CreateVolume"
	mDeleteVolume    = "/csi.v1.Controller/DeleteVolume"
	mPublish         = "/csi.v1.Controller/ControllerPublishVolume"
	mCreateSnapshot  = "/csi.v1.Controller/CreateSnapshot"
	mDeleteSnapshot  = "/csi.v1.Controller/DeleteSnapshot"
	mNodePublish     = "/csi.v1.Node/NodePublishVolume"
	serialCanaryNode = "node-SERIAL-CANARY-5e1d"
)

// startSerialHarness serves every method from f on transport tr and returns the server's
// Serializer too.
func startSerialHarness(t *testing.T, tr Transport, f backends.Backend) (*serverHarness, *Serializer) {
	t.Helper()
	ts := startServerHarness(t, tr, Options{
		Routes:   []Route{{Methods: []string{"*"}, Backend: "fake"}},
		Backends: map[string]backends.Backend{"fake": f},
		// A thousand identical calls in flight on the harness's one connection.
		Limits: TransportLimits{MaxConcurrentStreams: 2000},
	}, ListenerPolicy{}, slog.LevelInfo)
	return ts, ts.srv.serializer()
}

func publishRequest(volume, node string) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: volume, NodeId: node, VolumeCapability: serverMountCap()}
}

// async runs call on its own goroutine and returns where its error arrives.
func async(call func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- call() }()
	return ch
}

// receive waits for an async call's error.
func receive(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the call never returned")
		return nil
	}
}

func wantStatus(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code || (msg != "" && st.Message() != msg) {
		t.Errorf("%s: %v %q, want %v %q", what, st.Code(), st.Message(), code, msg)
	}
}

// TestSerialJoinsThousandIdenticalCreateVolumes: 1,000 identical calls in flight together
// make one backend call, and every caller gets its answer.
func TestSerialJoinsThousandIdenticalCreateVolumes(t *testing.T) {
	onEachTransport(t, testSerialJoinsThousandIdenticalCreateVolumes)
}

func testSerialJoinsThousandIdenticalCreateVolumes(t *testing.T, tr Transport) {
	want := &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-join", CapacityBytes: 8 << 20,
		VolumeContext: map[string]string{"pool": "p1"}}}
	fake := newSerialFake(mCreateVolume)
	fake.answer = func(string, []byte) ([]byte, error) { return proto.Marshal(want) }
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)

	req := serverCreateVolumeRequest("pvc-join")
	// A map: each caller's encoding may order it differently, and still joins.
	req.Parameters = map[string]string{"tier": "gold", "zone": "a", "fs": "ext4", "replicas": "3"}
	const n = 1000
	resps := make([]*csi.CreateVolumeResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resps[i], errs[i] = client.CreateVolume(ctx, req)
		})
	}
	fake.waitEntered(t, 1)
	eventually(t, "every caller has joined", func() bool { return sz.waiting("volume-name:pvc-join") == n })
	fake.open(mCreateVolume)
	wg.Wait()

	for i := range n {
		if errs[i] != nil || !proto.Equal(resps[i], want) {
			t.Fatalf("caller %d: %v, %v; want %v", i, resps[i], errs[i], want)
		}
	}
	if got := fake.count(mCreateVolume); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
	// Each caller's log line names the backend; the one backend attempt is counted once.
	eventually(t, "every call is logged", func() bool { return len(ts.log.lines(t, "call")) == n })
	attempts := 0.0
	for _, line := range ts.log.lines(t, "call") {
		if line["code"] != "OK" || line["backend"] != "fake" {
			t.Fatalf("log line %v", line)
		}
		attempts += line["attempts"].(float64)
	}
	if attempts != 1 {
		t.Errorf("attempts logged = %v, want 1", attempts)
	}
}

// countingBackend counts the unary calls that reach the backend it wraps.
type countingBackend struct {
	backends.Backend
	mu sync.Mutex
	n  map[string]int
}

func (c *countingBackend) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
	return c.Backend.Unary(ctx, method, req)
}

// TestSerialThousandCreateVolumesEmbedded: the same through the real embedded appliance
// makes one volume, and every caller gets it.
func TestSerialThousandCreateVolumesEmbedded(t *testing.T) {
	onEachTransport(t, testSerialThousandCreateVolumesEmbedded)
}

func testSerialThousandCreateVolumesEmbedded(t *testing.T, tr Transport) {
	be, err := embedded.OpenBackend("appliance", embedded.Config{DataDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	counted := &countingBackend{Backend: be, n: map[string]int{}}
	ts, sz := startSerialHarness(t, tr, counted)
	client := csi.NewControllerClient(ts.conn)

	req := serverCreateVolumeRequest("pvc-embedded")
	req.Parameters = map[string]string{"tier": "premium", "iops": "3000", "throughput": "125"}
	const n = 1000
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			resp, err := client.CreateVolume(ctx, req)
			ids[i], errs[i] = resp.GetVolume().GetVolumeId(), err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] == "" || ids[i] != ids[0] {
			t.Fatalf("caller %d: volume %q, %v; want %q", i, ids[i], errs[i], ids[0])
		}
	}
	list, err := client.ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetEntries()) != 1 || list.GetEntries()[0].GetVolume().GetVolumeId() != ids[0] {
		t.Errorf("volumes = %v, want only %s", list.GetEntries(), ids[0])
	}
	counted.mu.Lock()
	t.Logf("%d callers, %d CreateVolume calls reached the appliance", n, counted.n[mCreateVolume])
	counted.mu.Unlock()
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialConflictsAborted: while a ControllerPublishVolume is in flight, every other
// operation on the volume is refused with ABORTED naming it, without reaching the backend;
// a publish of the same volume to another node proceeds.
func TestSerialConflictsAborted(t *testing.T) { onEachTransport(t, testSerialConflictsAborted) }

func testSerialConflictsAborted(t *testing.T, tr Transport) {
	fake := newSerialFake(mPublish)
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	node := csi.NewNodeClient(ts.conn)

	first := async(func() error {
		_, err := client.ControllerPublishVolume(serverCallCtx(t), publishRequest("vol-1", "node-1"))
		return err
	})
	fake.waitEntered(t, 1)

	const inFlight = `csi-gateway: volume "vol-1": ControllerPublishVolume (node "node-1") is already in progress; `
	readonly := publishRequest("vol-1", "node-1")
	readonly.Readonly = true
	tests := []struct {
		name string
		call func(ctx context.Context) error
		want string
	}{
		{"DeleteVolume", func(ctx context.Context) error {
			_, err := client.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-1"})
			return err
		}, inFlight + "retry DeleteVolume when it has finished"},
		{"ControllerExpandVolume", func(ctx context.Context) error {
			_, err := client.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1",
				CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}})
			return err
		}, inFlight + "retry ControllerExpandVolume when it has finished"},
		{"unpublish from the same node", func(ctx context.Context) error {
			_, err := client.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1"})
			return err
		}, inFlight + "retry ControllerUnpublishVolume when it has finished"},
		{"unpublish from every node", func(ctx context.Context) error {
			_, err := client.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1"})
			return err
		}, inFlight + "retry ControllerUnpublishVolume when it has finished"},
		{"a different publish to the same node", func(ctx context.Context) error {
			_, err := client.ControllerPublishVolume(ctx, readonly)
			return err
		}, `csi-gateway: volume "vol-1": another ControllerPublishVolume (node "node-1") is already in progress; retry ControllerPublishVolume when it has finished`},
		{"NodeStageVolume", func(ctx context.Context) error {
			_, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging",
				VolumeCapability: serverMountCap()})
			return err
		}, inFlight + "retry NodeStageVolume when it has finished"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantStatus(t, tt.name, tt.call(serverCallCtx(t)), codes.Aborted, tt.want)
		})
	}
	for _, m := range []string{mDeleteVolume, "/csi.v1.Controller/ControllerExpandVolume",
		"/csi.v1.Controller/ControllerUnpublishVolume", "/csi.v1.Node/NodeStageVolume"} {
		if got := fake.count(m); got != 0 {
			t.Errorf("%s reached the backend %d times while the publish was in flight", m, got)
		}
	}
	if got := fake.count(mPublish); got != 1 {
		t.Errorf("publishes at the backend = %d, want 1", got)
	}

	// Another node's attachment is another operation: it runs alongside.
	second := async(func() error {
		_, err := client.ControllerPublishVolume(serverCallCtx(t), publishRequest("vol-1", "node-2"))
		return err
	})
	fake.waitEntered(t, 1)
	fake.open(mPublish)
	for i, ch := range []<-chan error{first, second} {
		if err := receive(t, ch); err != nil {
			t.Errorf("publish %d: %v", i+1, err)
		}
	}
	// Once they have finished the volume is free again.
	if _, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-1"}); err != nil {
		t.Errorf("DeleteVolume after the publishes: %v", err)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialIdenticalDeleteJoins: identical DeleteVolume calls join, and all get the
// canonical answer (a volume already gone is OK); a different DeleteVolume is refused.
func TestSerialIdenticalDeleteJoins(t *testing.T) { onEachTransport(t, testSerialIdenticalDeleteJoins) }

func testSerialIdenticalDeleteJoins(t *testing.T, tr Transport) {
	fake := newSerialFake(mDeleteVolume)
	fake.answer = func(string, []byte) ([]byte, error) {
		return nil, backends.Errorf(backends.ClassNotFound, `backend "fake": volume vol-9 does not exist`)
	}
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)

	const n = 10
	var chans []<-chan error
	for range n {
		chans = append(chans, async(func() error {
			resp, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-9"})
			if err == nil && proto.Size(resp) != 0 {
				return fmt.Errorf("response %v, want empty", resp)
			}
			return err
		}))
	}
	fake.waitEntered(t, 1)
	eventually(t, "every delete has joined", func() bool { return sz.waiting("volume:vol-9") == n })

	_, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-9",
		Secrets: map[string]string{"user": "admin"}})
	wantStatus(t, "a different DeleteVolume", err, codes.Aborted,
		`csi-gateway: volume "vol-9": another DeleteVolume is already in progress; retry DeleteVolume when it has finished`)

	fake.open(mDeleteVolume)
	for i, ch := range chans {
		if err := receive(t, ch); err != nil {
			t.Errorf("delete %d: %v", i+1, err)
		}
	}
	if got := fake.count(mDeleteVolume); got != 1 {
		t.Errorf("backend deletes = %d, want 1", got)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialDifferentObjectsInParallel: operations on different objects (and on a name and
// an ID that happen to be equal) all reach the backend at once.
func TestSerialDifferentObjectsInParallel(t *testing.T) {
	onEachTransport(t, testSerialDifferentObjectsInParallel)
}

func testSerialDifferentObjectsInParallel(t *testing.T, tr Transport) {
	fake := newSerialFake(mPublish, mCreateVolume, mCreateSnapshot, mDeleteSnapshot, mNodePublish)
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	node := csi.NewNodeClient(ts.conn)

	calls := []func(ctx context.Context) error{
		func(ctx context.Context) error {
			_, err := client.ControllerPublishVolume(ctx, publishRequest("vol-1", "node-1"))
			return err
		},
		func(ctx context.Context) error {
			_, err := client.ControllerPublishVolume(ctx, publishRequest("vol-2", "node-1"))
			return err
		},
		func(ctx context.Context) error {
			_, err := client.CreateVolume(ctx, serverCreateVolumeRequest("vol-1"))
			return err
		},
		func(ctx context.Context) error {
			_, err := client.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "vol-1", SourceVolumeId: "vol-1"})
			return err
		},
		func(ctx context.Context) error {
			_, err := client.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "vol-1"})
			return err
		},
		func(ctx context.Context) error {
			_, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-3", TargetPath: "/pods/a",
				VolumeCapability: serverMountCap()})
			return err
		},
		func(ctx context.Context) error {
			_, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-3", TargetPath: "/pods/b",
				VolumeCapability: serverMountCap()})
			return err
		},
	}
	var chans []<-chan error
	for _, call := range calls {
		chans = append(chans, async(func() error { return call(serverCallCtx(t)) }))
	}
	fake.waitEntered(t, len(calls)) // all at the backend together
	for _, m := range []string{mPublish, mCreateVolume, mCreateSnapshot, mDeleteSnapshot, mNodePublish} {
		fake.open(m)
	}
	for i, ch := range chans {
		if err := receive(t, ch); err != nil {
			t.Errorf("call %d: %v", i+1, err)
		}
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialReadsNotSerialized: reads of a volume proceed while a DeleteVolume of it is in
// flight.
func TestSerialReadsNotSerialized(t *testing.T) { onEachTransport(t, testSerialReadsNotSerialized) }

func testSerialReadsNotSerialized(t *testing.T, tr Transport) {
	fake := newSerialFake(mDeleteVolume)
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	node := csi.NewNodeClient(ts.conn)

	deleting := async(func() error {
		_, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-1"})
		return err
	})
	fake.waitEntered(t, 1)

	reads := map[string]func(ctx context.Context) error{
		"/csi.v1.Controller/ControllerGetVolume": func(ctx context.Context) error {
			_, err := client.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"})
			return err
		},
		"/csi.v1.Controller/ValidateVolumeCapabilities": func(ctx context.Context) error {
			_, err := client.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1",
				VolumeCapabilities: []*csi.VolumeCapability{serverMountCap()}})
			return err
		},
		"/csi.v1.Controller/ListVolumes": func(ctx context.Context) error {
			_, err := client.ListVolumes(ctx, &csi.ListVolumesRequest{})
			return err
		},
		"/csi.v1.Controller/GetCapacity": func(ctx context.Context) error {
			_, err := client.GetCapacity(ctx, &csi.GetCapacityRequest{})
			return err
		},
		"/csi.v1.Node/NodeGetVolumeStats": func(ctx context.Context) error {
			_, err := node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: "/pods/a"})
			return err
		},
		"/csi.v1.Controller/ControllerGetCapabilities": func(ctx context.Context) error {
			_, err := client.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
			return err
		},
	}
	for method, read := range reads {
		if err := read(serverCallCtx(t)); err != nil {
			t.Errorf("%s while a delete is in flight: %v", method, err)
		}
		if got := fake.count(method); got != 1 {
			t.Errorf("%s reached the backend %d times, want 1", method, got)
		}
	}
	fake.open(mDeleteVolume)
	if err := receive(t, deleting); err != nil {
		t.Errorf("DeleteVolume: %v", err)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialJoinedCallerDeadline: a joined caller whose deadline passes stops waiting with
// DEADLINE_EXCEEDED; the shared backend call goes on for the caller still waiting.
func TestSerialJoinedCallerDeadline(t *testing.T) { onEachTransport(t, testSerialJoinedCallerDeadline) }

func testSerialJoinedCallerDeadline(t *testing.T, tr Transport) {
	fake := newSerialFake(mCreateVolume)
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	req := serverCreateVolumeRequest("pvc-dl")

	patient := async(func() error {
		_, err := client.CreateVolume(serverCallCtx(t), req)
		return err
	})
	fake.waitEntered(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := client.CreateVolume(ctx, req)
	wantStatus(t, "the impatient caller", err, codes.DeadlineExceeded, "")
	eventually(t, "the impatient caller has left", func() bool { return sz.waiting("volume-name:pvc-dl") == 1 })
	eventually(t, "the impatient caller is logged", func() bool { return len(ts.log.lines(t, "call")) == 1 })

	select {
	case err := <-patient:
		t.Fatalf("the patient caller returned early: %v", err)
	default:
	}
	if err := fake.ctx(0).Err(); err != nil {
		t.Errorf("the backend call ended with the impatient caller: %v", err)
	}
	fake.open(mCreateVolume)
	if err := receive(t, patient); err != nil {
		t.Errorf("the patient caller: %v", err)
	}
	if got := fake.count(mCreateVolume); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
	// The impatient caller's own line says why it stopped.
	var codesLogged []string
	for _, line := range ts.log.lines(t, "call") {
		codesLogged = append(codesLogged, fmt.Sprint(line["code"]))
	}
	if strings.Join(codesLogged, ",") != "DeadlineExceeded,OK" {
		t.Errorf("codes logged = %v, want DeadlineExceeded then OK", codesLogged)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialFirstCallerLeaves: the caller that started the backend call going away cancels
// only its own wait.
func TestSerialFirstCallerLeaves(t *testing.T) { onEachTransport(t, testSerialFirstCallerLeaves) }

func testSerialFirstCallerLeaves(t *testing.T, tr Transport) {
	fake := newSerialFake(mCreateVolume)
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	req := serverCreateVolumeRequest("pvc-first")

	firstCtx, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	first := async(func() error {
		_, err := client.CreateVolume(firstCtx, req)
		return err
	})
	fake.waitEntered(t, 1)
	second := async(func() error {
		_, err := client.CreateVolume(serverCallCtx(t), req)
		return err
	})
	eventually(t, "the second caller has joined", func() bool { return sz.waiting("volume-name:pvc-first") == 2 })
	cancelFirst()
	wantStatus(t, "the first caller", receive(t, first), codes.Canceled, "")
	eventually(t, "the first caller has left", func() bool { return sz.waiting("volume-name:pvc-first") == 1 })
	if err := fake.ctx(0).Err(); err != nil {
		t.Errorf("the backend call ended with the first caller: %v", err)
	}
	fake.open(mCreateVolume)
	if err := receive(t, second); err != nil {
		t.Errorf("the second caller: %v", err)
	}
	if got := fake.count(mCreateVolume); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialLeaderDeadline: the shared call carries its first caller's deadline to the
// backend; when that deadline ends it, a caller that joined with more time left makes the
// call again instead of failing.
func TestSerialLeaderDeadline(t *testing.T) { onEachTransport(t, testSerialLeaderDeadline) }

func testSerialLeaderDeadline(t *testing.T, tr Transport) {
	fake := newSerialFake(mCreateVolume)
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	req := serverCreateVolumeRequest("pvc-leader")

	leaderCtx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	leaderDeadline, _ := leaderCtx.Deadline()
	leader := async(func() error {
		_, err := client.CreateVolume(leaderCtx, req)
		return err
	})
	fake.waitEntered(t, 1)
	// The server derives it from grpc-timeout: a little later than the client's own clock.
	if dl, ok := fake.ctx(0).Deadline(); !ok || dl.Sub(leaderDeadline).Abs() > 100*time.Millisecond {
		t.Errorf("the backend's deadline = %v, %v; want the first caller's, %v", dl, ok, leaderDeadline)
	}
	joiner := async(func() error {
		_, err := client.CreateVolume(serverCallCtx(t), req)
		return err
	})
	eventually(t, "the second caller has joined", func() bool { return sz.waiting("volume-name:pvc-leader") == 2 })

	wantStatus(t, "the first caller", receive(t, leader), codes.DeadlineExceeded, "")
	fake.waitEntered(t, 1) // the joiner's own call
	if err := fake.ctx(0).Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the first backend call ended with %v, want its deadline", err)
	}
	if dl, ok := fake.ctx(1).Deadline(); !ok || !dl.After(leaderDeadline.Add(time.Second)) {
		t.Errorf("the second backend call's deadline = %v, %v; want the joiner's", dl, ok)
	}
	fake.open(mCreateVolume)
	if err := receive(t, joiner); err != nil {
		t.Errorf("the joiner: %v", err)
	}
	if got := fake.count(mCreateVolume); got != 2 {
		t.Errorf("backend calls = %d, want 2", got)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialLastCallerLeaves: when every caller has gone the backend call is cancelled and
// the table emptied; the next identical call is a new backend call.
func TestSerialLastCallerLeaves(t *testing.T) { onEachTransport(t, testSerialLastCallerLeaves) }

func testSerialLastCallerLeaves(t *testing.T, tr Transport) {
	fake := newSerialFake(mCreateVolume)
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	req := serverCreateVolumeRequest("pvc-last")

	ctx, cancel := context.WithCancel(context.Background())
	only := async(func() error {
		_, err := client.CreateVolume(ctx, req)
		return err
	})
	fake.waitEntered(t, 1)
	cancel()
	wantStatus(t, "the only caller", receive(t, only), codes.Canceled, "")
	eventually(t, "the backend call is cancelled", func() bool { return fake.ctx(0).Err() != nil })
	eventually(t, "the table is empty", func() bool { return sz.InFlight() == 0 })

	fake.open(mCreateVolume)
	if _, err := client.CreateVolume(serverCallCtx(t), req); err != nil {
		t.Errorf("the next call: %v", err)
	}
	if got := fake.count(mCreateVolume); got != 2 {
		t.Errorf("backend calls = %d, want 2", got)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialWaitsOutAbandonedCall: an identical call that arrives while an abandoned call
// is still being cancelled waits for it to end and then starts afresh, so the backend never
// has two calls on the object at once; a different call is refused meanwhile.
func TestSerialWaitsOutAbandonedCall(t *testing.T) {
	sz := NewSerializer()
	var mu sync.Mutex
	calls, running, maxRunning := 0, 0, 0
	entered := make(chan struct{}, 2)
	unwind := make(chan struct{})
	backend := func(ctx context.Context, call *Call) error {
		mu.Lock()
		calls++
		n := calls
		running++
		maxRunning = max(maxRunning, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		entered <- struct{}{}
		if n == 1 {
			<-ctx.Done()
			<-unwind // a backend slow to notice the cancellation
			return ctx.Err()
		}
		call.Response = []byte{}
		return nil
	}
	h := serializeCalls(sz, slog.New(slog.DiscardHandler), redact.NewRedactor())(backend)
	newCall := func(t *testing.T, m proto.Message, method string) *Call {
		t.Helper()
		raw, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return &Call{Method: method, Request: raw, info: lookupMethod(method)}
	}
	del := &csi.DeleteVolumeRequest{VolumeId: "vol-a"}

	firstCall, againCall := newCall(t, del, mDeleteVolume), newCall(t, del, mDeleteVolume)
	expandCall := newCall(t, &csi.ControllerExpandVolumeRequest{VolumeId: "vol-a"}, "/csi.v1.Controller/ControllerExpandVolume")

	ctx1, cancel1 := context.WithCancel(context.Background())
	first := async(func() error { return h(ctx1, firstCall) })
	<-entered
	cancel1()
	wantStatus(t, "the first caller", receive(t, first), codes.Canceled, "")

	again := async(func() error { return h(context.Background(), againCall) })
	err := h(context.Background(), expandCall)
	wantStatus(t, "a different call", err, codes.Aborted,
		`csi-gateway: volume "vol-a": DeleteVolume is already in progress; retry ControllerExpandVolume when it has finished`)
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	if calls != 1 {
		t.Errorf("the identical call reached the backend while the first was unwinding")
	}
	mu.Unlock()

	close(unwind)
	if err := receive(t, again); err != nil {
		t.Errorf("the identical call: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 || maxRunning != 1 {
		t.Errorf("backend calls = %d, at most %d at once; want 2, one at a time", calls, maxRunning)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}

// TestSerialJoinsDifferentlyEncodedRequest: the same request with its map entries in
// another order is not byte-identical, and still joins.
func TestSerialJoinsDifferentlyEncodedRequest(t *testing.T) {
	onEachTransport(t, testSerialJoinsDifferentlyEncodedRequest)
}

func testSerialJoinsDifferentlyEncodedRequest(t *testing.T, tr Transport) {
	fake := newSerialFake(mCreateVolume)
	ts, sz := startSerialHarness(t, tr, fake)

	base, err := proto.Marshal(serverCreateVolumeRequest("pvc-maps"))
	if err != nil {
		t.Fatal(err)
	}
	// Concatenated messages merge: each piece adds one map entry.
	entry := func(k, v string) []byte {
		b, err := proto.Marshal(&csi.CreateVolumeRequest{Parameters: map[string]string{k: v}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := entry("tier", "gold"), entry("zone", "z1")
	raw1 := bytes.Join([][]byte{base, a, b}, nil)
	raw2 := bytes.Join([][]byte{base, b, a}, nil)
	if bytes.Equal(raw1, raw2) {
		t.Fatal("the two encodings are equal")
	}
	send := func(raw []byte) <-chan error {
		return async(func() error {
			var resp rawcodec.Frame
			return ts.conn.Invoke(serverCallCtx(t), mCreateVolume, &rawcodec.Frame{Payload: raw}, &resp, grpc.ForceCodecV2(rawcodec.Codec{}))
		})
	}
	first := send(raw1)
	fake.waitEntered(t, 1)
	second := send(raw2)
	eventually(t, "the second encoding has joined", func() bool { return sz.waiting("volume-name:pvc-maps") == 2 })
	fake.open(mCreateVolume)
	for i, ch := range []<-chan error{first, second} {
		if err := receive(t, ch); err != nil {
			t.Errorf("call %d: %v", i+1, err)
		}
	}
	if got := fake.count(mCreateVolume); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
}

// TestSerialAbortedIsCanonical: the refusal is a CSI status as the spec requires: code 10
// ABORTED, no details, a message of at most 1 KiB with the request's secret values scrubbed.
func TestSerialAbortedIsCanonical(t *testing.T) { onEachTransport(t, testSerialAbortedIsCanonical) }

func testSerialAbortedIsCanonical(t *testing.T, tr Transport) {
	fake := newSerialFake(mPublish, mNodePublish)
	ts, _ := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	node := csi.NewNodeClient(ts.conn)

	// A publish to a node whose name is also a secret value of the refused call.
	publishing := async(func() error {
		_, err := client.ControllerPublishVolume(serverCallCtx(t), publishRequest("vol-1", serialCanaryNode))
		return err
	})
	longPath := "/var/lib/kubelet/pods/" + strings.Repeat("p", 3000) + "/mount"
	mounting := async(func() error {
		_, err := node.NodePublishVolume(serverCallCtx(t), &csi.NodePublishVolumeRequest{VolumeId: "vol-2",
			TargetPath: longPath, VolumeCapability: serverMountCap()})
		return err
	})
	fake.waitEntered(t, 2)

	_, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-1",
		Secrets: map[string]string{"password": serialCanaryNode}})
	st, _ := status.FromError(err)
	if st.Code() != codes.Aborted || int(st.Code()) != 10 || len(st.Proto().GetDetails()) != 0 {
		t.Errorf("got %v (%d) with %d details, want ABORTED (10) and none", st.Code(), st.Code(), len(st.Proto().GetDetails()))
	}
	want := `csi-gateway: volume "vol-1": ControllerPublishVolume (node "***") is already in progress; retry DeleteVolume when it has finished`
	if st.Message() != want {
		t.Errorf("message %q, want %q", st.Message(), want)
	}

	_, err = node.NodeUnstageVolume(serverCallCtx(t), &csi.NodeUnstageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: "/staging"})
	st, _ = status.FromError(err)
	if st.Code() != codes.Aborted || len(st.Message()) > maxMessageBytes || len(st.Proto().GetDetails()) != 0 ||
		!strings.HasPrefix(st.Message(), `csi-gateway: volume "vol-2": NodePublishVolume (target path "/var/lib/kubelet/pods/ppp`) ||
		!strings.HasSuffix(st.Message(), "…") {
		t.Errorf("got %v, %d bytes: %.120q…", st.Code(), len(st.Message()), st.Message())
	}

	fake.open(mPublish)
	fake.open(mNodePublish)
	for i, ch := range []<-chan error{publishing, mounting} {
		if err := receive(t, ch); err != nil {
			t.Errorf("call %d: %v", i+1, err)
		}
	}
	// The refusals are logged with the code the callers got.
	var aborted int
	for _, line := range ts.log.lines(t, "call") {
		if line["code"] == "Aborted" {
			aborted++
		}
	}
	if aborted != 2 {
		t.Errorf("%d ABORTED log lines, want 2", aborted)
	}
}

// TestSerialBackendPanic: a panic in the shared backend call fails that call for every
// caller with INTERNAL, and the gateway goes on.
func TestSerialBackendPanic(t *testing.T) { onEachTransport(t, testSerialBackendPanic) }

func testSerialBackendPanic(t *testing.T, tr Transport) {
	fake := newSerialFake()
	var once sync.Once
	fake.answer = func(string, []byte) ([]byte, error) {
		once.Do(func() { panic("backend bug") })
		return nil, nil
	}
	ts, sz := startSerialHarness(t, tr, fake)
	client := csi.NewControllerClient(ts.conn)
	_, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-p"})
	wantStatus(t, "the panicking call", err, codes.Internal, "csi-gateway: internal error while serving DeleteVolume; see the gateway's log")
	if _, err := client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-p"}); err != nil {
		t.Errorf("the next call: %v", err)
	}
	if len(ts.log.lines(t, "panic while serving a call")) != 1 {
		t.Errorf("the panic was not logged:\n%s", ts.log)
	}
	if got := sz.InFlight(); got != 0 {
		t.Errorf("%d operations left in flight", got)
	}
}
