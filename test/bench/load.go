package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/test/bench/messages"
)

// clients are the CSI services of one connection to a relay.
type clients struct {
	identity   csi.IdentityClient
	controller csi.ControllerClient
	node       csi.NodeClient
	metadata   csi.SnapshotMetadataClient
}

func newClients(conn *grpc.ClientConn) clients {
	return clients{csi.NewIdentityClient(conn), csi.NewControllerClient(conn), csi.NewNodeClient(conn), csi.NewSnapshotMetadataClient(conn)}
}

// workload is one kind of call the bench measures.
type workload struct {
	name string
	// request builds worker w's request, once per window. Each worker asks about its own
	// object (its own volume name, volume ID, snapshot ID): the gateway joins identical
	// calls to one object in flight, which would measure something else.
	request func(worker int) proto.Message
	// call makes one call with req and checks the answer.
	call func(ctx context.Context, c clients, req proto.Message) error
}

// workloads are the calls of issue #8, in the order the report lists them.
var workloads = []workload{
	{name: "Probe", request: probeRequest, call: callProbe},
	{name: "CreateVolume", request: perWorker("pvc", messages.CreateVolumeRequest), call: callCreateVolume},
	{name: "ListVolumes100", request: listVolumesRequest, call: callListVolumes},
	{name: "NodePublishVolume", request: perWorker("vol", messages.NodePublishVolumeRequest), call: callNodePublishVolume},
	{name: "GetMetadataAllocated", request: perWorker("snap", messages.GetMetadataAllocatedRequest), call: callGetMetadataAllocated},
}

// perWorker is a workload's request about worker w's own object, named "<kind>-bench-<w>".
func perWorker[M proto.Message](kind string, build func(name string) M) func(worker int) proto.Message {
	return func(w int) proto.Message { return build(fmt.Sprintf("%s-bench-%d", kind, w)) }
}

func probeRequest(int) proto.Message { return &csi.ProbeRequest{} }

func callProbe(ctx context.Context, c clients, req proto.Message) error {
	_, err := c.identity.Probe(ctx, req.(*csi.ProbeRequest))
	return err
}

func callCreateVolume(ctx context.Context, c clients, req proto.Message) error {
	r := req.(*csi.CreateVolumeRequest)
	resp, err := c.controller.CreateVolume(ctx, r)
	if err == nil && resp.GetVolume().GetVolumeId() != messages.VolumeID(r.GetName()) {
		err = fmt.Errorf("CreateVolume %s: volume ID %q", r.GetName(), resp.GetVolume().GetVolumeId())
	}
	return err
}

func listVolumesRequest(int) proto.Message { return messages.ListVolumesRequest() }

func callListVolumes(ctx context.Context, c clients, req proto.Message) error {
	resp, err := c.controller.ListVolumes(ctx, req.(*csi.ListVolumesRequest))
	if err == nil && len(resp.GetEntries()) != messages.ListVolumesEntries {
		err = fmt.Errorf("ListVolumes: %d entries", len(resp.GetEntries()))
	}
	return err
}

func callNodePublishVolume(ctx context.Context, c clients, req proto.Message) error {
	_, err := c.node.NodePublishVolume(ctx, req.(*csi.NodePublishVolumeRequest))
	return err
}

// callGetMetadataAllocated reads the whole stream: the call's latency is to its end.
func callGetMetadataAllocated(ctx context.Context, c clients, req proto.Message) error {
	stream, err := c.metadata.GetMetadataAllocated(ctx, req.(*csi.GetMetadataAllocatedRequest))
	if err != nil {
		return err
	}
	n := 0
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n++
	}
	if n != messages.SnapshotMetadataResponses {
		return fmt.Errorf("GetMetadataAllocated: %d responses, want %d", n, messages.SnapshotMetadataResponses)
	}
	return nil
}

// window is the outcome of one relay running one workload for one window.
type window struct {
	calls, errors int
	firstError    error
	elapsed       time.Duration
	latencies     []time.Duration // of the calls that succeeded, sorted
}

func (w window) callsPerSecond() float64 {
	if w.elapsed <= 0 {
		return 0
	}
	return float64(w.calls) / w.elapsed.Seconds()
}

// callTimeout bounds one call, so a relay that stops answering fails its window instead of
// hanging the bench.
const callTimeout = 10 * time.Second

// runWindow has concurrency workers make wl's call back to back for d, and returns every
// call's latency. Workers start no call after d; elapsed runs until the last one returns.
func runWindow(ctx context.Context, c clients, wl workload, concurrency int, d time.Duration) window {
	var (
		mu  sync.Mutex
		res window
		wg  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range concurrency {
		wg.Go(func() {
			req := wl.request(w)
			lat := make([]time.Duration, 0, 1024)
			var errs int
			var first error
			for time.Now().Before(deadline) && ctx.Err() == nil {
				callCtx, cancel := context.WithTimeout(ctx, callTimeout)
				t0 := time.Now()
				err := wl.call(callCtx, c, req)
				took := time.Since(t0)
				cancel()
				if err != nil {
					errs++
					first = cmp.Or(first, err)
					continue
				}
				lat = append(lat, took)
			}
			mu.Lock()
			defer mu.Unlock()
			res.latencies = append(res.latencies, lat...)
			res.errors += errs
			res.firstError = cmp.Or(res.firstError, first)
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.calls = len(res.latencies)
	slices.Sort(res.latencies)
	return res
}
