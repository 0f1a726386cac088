package tenancy

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
)

// The helpers of the handle tests: the reference appliance in process, an Invoker over it
// (as the proxy's: marshal, call, unmarshal into the method's response type), and a world of
// two tenants sharing it through one Ledger.

// openAppliance opens the embedded appliance on a fresh directory, closed when the test ends.
func openAppliance(t testing.TB, dataDir string) *embedded.Backend {
	t.Helper()
	b, err := embedded.OpenBackend("appliance", embedded.Config{DataDir: dataDir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// responseType returns a new, empty response of a full method name, found through the
// registry the way the proxy's method table finds it.
func responseType(method string) (proto.Message, error) {
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, errors.New(service + " is not a service")
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, errors.New("no method " + method)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, err
	}
	return mt.New().Interface(), nil
}

// recorder counts the calls an Invoker sends to the appliance.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(method string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, method)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recorder) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls[n:])
}

// invokerOf returns an Invoker that sends calls to a backend (the appliance, or a REST
// backend in front of one) as bytes, as the proxy's chain does, and answers the backend's
// failures as gRPC statuses of the class's code.
func invokerOf(b backends.Backend, rec *recorder) Invoker {
	return func(ctx context.Context, method string, req proto.Message) (proto.Message, error) {
		if rec != nil {
			rec.add(method)
		}
		in, err := proto.Marshal(req)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "marshal: %v", err)
		}
		out, err := b.Unary(ctx, method, in)
		if err != nil {
			return nil, status.Error(backends.ClassOf(err).Code(), err.Error())
		}
		resp, err := responseType(method)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%s: %v", method, err)
		}
		if err := proto.Unmarshal(out, resp); err != nil {
			return nil, status.Errorf(codes.Internal, "unmarshal: %v", err)
		}
		return resp, nil
	}
}

// world is two or more tenants sharing one backend (the appliance, unless newWorldOn) through
// one ledger.
type world struct {
	t       *testing.T
	ledger  *Ledger
	back    backends.Backend
	dataDir string // the appliance's; "" for newWorldOn's
	rec     *recorder
	direct  Invoker // straight to the backend, unscoped
}

func newWorld(t *testing.T, quotas map[string]Quota) *world {
	t.Helper()
	dir := t.TempDir()
	w := newWorldOn(t, openAppliance(t, dir), quotas)
	w.dataDir = dir
	return w
}

// newWorldOn is a world on backend b.
func newWorldOn(t *testing.T, b backends.Backend, quotas map[string]Quota) *world {
	t.Helper()
	l := openLedger(t, filepath.Join(t.TempDir(), "tenancy.db"), quotas)
	return &world{t: t, ledger: l, back: b, rec: &recorder{}, direct: invokerOf(b, nil)}
}

// call serves a tenant's call through the ledger.
func (w *world) call(tenant, method string, req proto.Message) (proto.Message, error) {
	return w.ledger.Handle(context.Background(), tenant, method, req, invokerOf(w.back, w.rec))
}

// must is call that fails the test on an error.
func (w *world) must(tenant, method string, req proto.Message) proto.Message {
	w.t.Helper()
	resp, err := w.call(tenant, method, req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", tenant, method, err)
	}
	return resp
}

// raw calls the appliance directly, unscoped.
func (w *world) raw(method string, req proto.Message) (proto.Message, error) {
	return w.direct(context.Background(), method, req)
}

var rwo = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

const mib = 1 << 20

// createVolume creates a volume of size bytes for a tenant and returns its (scoped) ID.
func (w *world) createVolume(tenant, name string, size int64) string {
	w.t.Helper()
	resp := w.must(tenant, createVolume, &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{rwo},
	}).(*csi.CreateVolumeResponse)
	return resp.GetVolume().GetVolumeId()
}

func (w *world) createSnapshot(tenant, name, volumeID string) string {
	w.t.Helper()
	resp := w.must(tenant, createSnapshot, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: volumeID}).(*csi.CreateSnapshotResponse)
	return resp.GetSnapshot().GetSnapshotId()
}

// backendVolumes returns the IDs of every volume in the appliance, listed directly.
func (w *world) backendVolumes() []string {
	w.t.Helper()
	resp, err := w.raw(listVolumes, &csi.ListVolumesRequest{})
	if err != nil {
		w.t.Fatal(err)
	}
	var ids []string
	for _, e := range resp.(*csi.ListVolumesResponse).GetEntries() {
		ids = append(ids, e.GetVolume().GetVolumeId())
	}
	return ids
}

// backendSnapshots returns the IDs of every snapshot in the appliance, listed directly.
func (w *world) backendSnapshots() []string {
	w.t.Helper()
	resp, err := w.raw(listSnapshots, &csi.ListSnapshotsRequest{})
	if err != nil {
		w.t.Fatal(err)
	}
	var ids []string
	for _, e := range resp.(*csi.ListSnapshotsResponse).GetEntries() {
		ids = append(ids, e.GetSnapshot().GetSnapshotId())
	}
	return ids
}

// usageNow returns a tenant's recorded usage (and reservations in flight); a store that
// cannot tell fails the test by panicking (there is no *testing.T here).
func (l *Ledger) usageNow(tenant string) usage {
	u, err := l.store.usage(context.Background(), tenant)
	if err != nil {
		panic(err)
	}
	return u
}

// unscope returns the backend ID behind a tenant's ID, failing the test when it is not one.
func unscope(t *testing.T, tenant, id string) string {
	t.Helper()
	b, ok := UnscopeID(tenant, id)
	if !ok {
		t.Fatalf("%q is not an ID of tenant %s", id, tenant)
	}
	return b
}

func wantCode(t *testing.T, err error, code codes.Code, fragments ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("got %v %q, want %v", st.Code(), st.Message(), code)
	}
	for _, f := range fragments {
		if !strings.Contains(st.Message(), f) {
			t.Errorf("message %q does not mention %q", st.Message(), f)
		}
	}
}
