package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csi-gateway/csi-gateway/auth"
)

// racyDriver is a CSI controller served by the test process on a Unix socket whose creates
// are unsafe under concurrent identical calls, as real arrays can be: CreateVolume and
// CreateSnapshot look the name up, wait window, then create, so two identical creates in
// flight together make two objects. The wait honours the call's deadline but not its
// cancellation: a create whose caller died (its connection broke) still completes, as on an
// array that does not notice, and so is a backend call still running after its replica died.
//
// It is the ground truth of the chaos tests: it keeps every object, every duplicate, the
// highest number of volumes each tenant ("TENANT." in the backend name) ever held, and a log
// of its mutating calls with the process ID of the gateway that made each (SO_PEERCRED).
type racyDriver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	window time.Duration

	mu         sync.Mutex
	seq        int
	volumes    map[string][]string  // backend name → the IDs created under it
	volumeOf   map[string]string    // ID → backend name
	snapshots  map[string][]string  // backend name → the snapshot IDs created under it
	snapshotOf map[string]*snapInfo // snapshot ID → what it is
	held       map[string]int       // tenant → volumes held now
	maxHeld    map[string]int       // tenant → the most it ever held
	duplicates int                  // objects created under a name that already had one
	calls      []backendCall
	waiting    map[int32]int // process ID → its creates waiting in their window
}

type snapInfo struct {
	name, source string
	created      *timestamppb.Timestamp
}

// backendCall is one mutating call as the driver saw it: its method, its object (a create's
// name, a delete's ID), the process that made it, when it arrived and when it was answered.
type backendCall struct {
	method, object string
	pid            int32
	start, end     time.Time
}

// startRacyDriver serves a racyDriver on a socket in dir and returns it with its endpoint.
func startRacyDriver(t *testing.T, dir string, window time.Duration) (*racyDriver, string) {
	t.Helper()
	d := &racyDriver{window: window, volumes: map[string][]string{}, volumeOf: map[string]string{},
		snapshots: map[string][]string{}, snapshotOf: map[string]*snapInfo{}, waiting: map[int32]int{}, held: map[string]int{}, maxHeld: map[string]int{}}
	sock := filepath.Join(dir, "driver.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(auth.UnixPeerCredentials{}))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return d, "unix://" + sock
}

// callerPID is the process ID of the gateway that made the call.
func callerPID(ctx context.Context) int32 {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(auth.PeerAuthInfo); ok {
			return info.Identity.PID
		}
	}
	return 0
}

// logCall records a mutating call that arrived at start, once it is answered.
func (d *racyDriver) logCall(ctx context.Context, method, object string, start time.Time) {
	d.mu.Lock()
	d.calls = append(d.calls, backendCall{method: method, object: object, pid: callerPID(ctx), start: start, end: time.Now()})
	d.mu.Unlock()
}

// creating reports whether a create of the process pid waits in its window.
func (d *racyDriver) creating(pid int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waiting[pid] > 0
}

// wait is the create's window between its look-up and its create: it ends early at the
// call's deadline (the gateway's grpc-timeout), which it reports as DEADLINE_EXCEEDED.
func (d *racyDriver) wait(ctx context.Context) error {
	pid := callerPID(ctx)
	d.mu.Lock()
	d.waiting[pid]++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.waiting[pid]--
		d.mu.Unlock()
	}()
	window := time.NewTimer(d.window)
	defer window.Stop()
	var expired <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		expire := time.NewTimer(time.Until(dl))
		defer expire.Stop()
		expired = expire.C
	}
	select {
	case <-window.C:
		return nil
	case <-expired:
		return status.Error(codes.DeadlineExceeded, "racy driver: the call's deadline passed before the create")
	}
}

func tenantOf(backendName string) string { return strings.SplitN(backendName, ".", 2)[0] }

func (d *racyDriver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	defer d.logCall(ctx, "CreateVolume", req.GetName(), time.Now())
	answer := func(id string) *csi.CreateVolumeResponse {
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}}
	}
	d.mu.Lock()
	ids := d.volumes[req.GetName()]
	d.mu.Unlock()
	if len(ids) > 0 {
		return answer(ids[0]), nil
	}
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	id := fmt.Sprintf("vol-%d", d.seq)
	if len(d.volumes[req.GetName()]) > 0 {
		d.duplicates++
	}
	d.volumes[req.GetName()] = append(d.volumes[req.GetName()], id)
	d.volumeOf[id] = req.GetName()
	tenant := tenantOf(req.GetName())
	d.held[tenant]++
	d.maxHeld[tenant] = max(d.maxHeld[tenant], d.held[tenant])
	return answer(id), nil
}

func (d *racyDriver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	defer d.logCall(ctx, "DeleteVolume", req.GetVolumeId(), time.Now())
	d.mu.Lock()
	defer d.mu.Unlock()
	id := req.GetVolumeId()
	name, ok := d.volumeOf[id]
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	delete(d.volumeOf, id)
	ids := d.volumes[name]
	for i := range ids {
		if ids[i] == id {
			d.volumes[name] = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	d.held[tenantOf(name)]--
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *racyDriver) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	defer d.logCall(ctx, "CreateSnapshot", req.GetName(), time.Now())
	answer := func(id string, info *snapInfo) *csi.CreateSnapshotResponse {
		return &csi.CreateSnapshotResponse{Snapshot: info.snapshot(id)}
	}
	d.mu.Lock()
	ids := d.snapshots[req.GetName()]
	var existing *snapInfo
	if len(ids) > 0 {
		existing = d.snapshotOf[ids[0]]
	}
	_, sourceExists := d.volumeOf[req.GetSourceVolumeId()]
	d.mu.Unlock()
	switch {
	case existing != nil && existing.source == req.GetSourceVolumeId():
		return answer(ids[0], existing), nil
	case existing != nil:
		return nil, status.Errorf(codes.AlreadyExists, "racy driver: snapshot %s exists, of another volume", req.GetName())
	case !sourceExists:
		return nil, status.Errorf(codes.NotFound, "racy driver: volume %s not found", req.GetSourceVolumeId())
	}
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	id := fmt.Sprintf("snap-%d", d.seq)
	if len(d.snapshots[req.GetName()]) > 0 {
		d.duplicates++
	}
	d.snapshots[req.GetName()] = append(d.snapshots[req.GetName()], id)
	info := &snapInfo{name: req.GetName(), source: req.GetSourceVolumeId(), created: timestamppb.Now()}
	d.snapshotOf[id] = info
	return answer(id, info), nil
}

func (s *snapInfo) snapshot(id string) *csi.Snapshot {
	return &csi.Snapshot{SnapshotId: id, SourceVolumeId: s.source, CreationTime: s.created, ReadyToUse: true, SizeBytes: 1 << 20}
}

func (d *racyDriver) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	info, ok := d.snapshotOf[req.GetSnapshotId()]
	if !ok {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	delete(d.snapshotOf, req.GetSnapshotId())
	ids := d.snapshots[info.name]
	for i := range ids {
		if ids[i] == req.GetSnapshotId() {
			d.snapshots[info.name] = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

func (d *racyDriver) ControllerGetVolume(_ context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.volumeOf[req.GetVolumeId()]; !ok {
		return nil, status.Errorf(codes.NotFound, "racy driver: volume %s not found", req.GetVolumeId())
	}
	return &csi.ControllerGetVolumeResponse{Volume: &csi.Volume{VolumeId: req.GetVolumeId(), CapacityBytes: 1 << 20}}, nil
}

func (d *racyDriver) ListVolumes(context.Context, *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	resp := &csi.ListVolumesResponse{}
	for id := range d.volumeOf {
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{VolumeId: id, CapacityBytes: 1 << 20}})
	}
	return resp, nil
}

func (d *racyDriver) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	resp := &csi.ListSnapshotsResponse{}
	for id, info := range d.snapshotOf {
		if (req.GetSnapshotId() == "" || req.GetSnapshotId() == id) && (req.GetSourceVolumeId() == "" || req.GetSourceVolumeId() == info.source) {
			resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: info.snapshot(id)})
		}
	}
	return resp, nil
}

func (d *racyDriver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS, csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *racyDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: "racy.csi.example.org", VendorVersion: "1"}, nil
}

func (d *racyDriver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{Type: &csi.PluginCapability_Service_{
		Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}}}}, nil
}

func (d *racyDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// objects returns the IDs the driver holds now: volumes and snapshots.
func (d *racyDriver) objects() (volumes, snapshots map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	volumes, snapshots = map[string]string{}, map[string]string{}
	for id, name := range d.volumeOf {
		volumes[id] = name
	}
	for id, info := range d.snapshotOf {
		snapshots[id] = info.name
	}
	return volumes, snapshots
}
