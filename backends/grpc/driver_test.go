package grpcbackend

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// testDriver is a small CSI driver on a real Unix socket. It records what reached it: the raw
// bytes of every request message, and the metadata and deadline of the last CreateVolume or
// GetMetadataAllocated call.
//
// CreateVolume behaves by name: "code-N" fails with status code N and message
// "driver says <code>", "slow" waits for the call's end; any other name succeeds, sets the header
// x-driver-header and the trailer x-driver-trailer.
type testDriver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedSnapshotMetadataServer

	target   string
	notReady atomic.Bool
	codec    *recordingCodec

	mu          sync.Mutex
	md          metadata.MD
	deadline    time.Time
	hasDeadline bool
}

func (d *testDriver) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	dl, ok := ctx.Deadline()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.md, d.deadline, d.hasDeadline = md.Copy(), dl, ok
}

func (d *testDriver) seen() (metadata.MD, time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.md, d.deadline, d.hasDeadline
}

func (d *testDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(!d.notReady.Load())}, nil
}

func (d *testDriver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d.record(ctx)
	name := req.GetName()
	if n, ok := strings.CutPrefix(name, "code-"); ok {
		c, _ := strconv.Atoi(n)
		return nil, status.Errorf(codes.Code(c), "driver says %s", codes.Code(c))
	}
	if name == "slow" {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-driver-header", "h1"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-driver-trailer", "t1"))
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-" + name, CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}}, nil
}

// GetMetadataAllocated sends three responses (offsets 0, 1 MiB, 2 MiB); for snapshot "block" it
// sends one and then waits for the call's end.
func (d *testDriver) GetMetadataAllocated(req *csi.GetMetadataAllocatedRequest, s csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	d.record(s.Context())
	_ = s.SetHeader(metadata.Pairs("x-driver-header", "h1"))
	s.SetTrailer(metadata.Pairs("x-driver-trailer", "t1"))
	n := 3
	if req.GetSnapshotId() == "block" {
		n = 1
	}
	for i := range n {
		if err := s.Send(&csi.GetMetadataAllocatedResponse{
			BlockMetadataType:   csi.BlockMetadataType_FIXED_LENGTH,
			VolumeCapacityBytes: 4 << 20,
			BlockMetadata:       []*csi.BlockMetadata{{ByteOffset: int64(i) << 20, SizeBytes: 1 << 20}},
		}); err != nil {
			return err
		}
	}
	if n == 1 {
		<-s.Context().Done()
		return s.Context().Err()
	}
	return nil
}

// recordingCodec is the driver's server codec: grpc's proto codec that keeps a copy of the wire
// bytes of every message it decodes.
type recordingCodec struct {
	mu   sync.Mutex
	msgs [][]byte
}

// protoCodec is grpc's registered proto codec.
var protoCodec = encoding.GetCodecV2("proto")

func (c *recordingCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }
func (c *recordingCodec) Name() string                           { return "proto" }
func (c *recordingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.mu.Lock()
	c.msgs = append(c.msgs, data.Materialize())
	c.mu.Unlock()
	return protoCodec.Unmarshal(data, v)
}

func (c *recordingCodec) received() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.msgs...)
}

// socketPath returns a path for a Unix socket in a fresh temporary directory, short enough for
// sun_path (108 bytes).
func socketPath(t testing.TB, name string) string {
	t.Helper()
	dir := t.TempDir()
	if len(dir)+len(name)+1 > 100 {
		d, err := os.MkdirTemp("", "gw")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	return filepath.Join(dir, name)
}

// serve serves srv on a new Unix socket and returns its target; the server stops at cleanup.
func serve(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	path := socketPath(t, "s.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "unix://" + path
}

// startDriver starts a testDriver with the grpc health service registered as well.
func startDriver(t *testing.T) *testDriver {
	t.Helper()
	d := &testDriver{codec: &recordingCodec{}}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(d.codec))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterSnapshotMetadataServer(srv, d)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	d.target = serve(t, srv)
	return d
}

// newBackend returns a Backend called "drv" for target, closed at cleanup.
func newBackend(t *testing.T, target string, opts ...Option) *Backend {
	t.Helper()
	b, err := New("drv", Config{Target: target}, append([]Option{WithFrames(framesUnderTest)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// front is a stand-in for the gateway's server: one unknown-service handler that hands every
// call to the backend, either through Unary (reading the request as a raw frame) or Stream. It
// keeps the error the backend returned for the last call.
type front struct {
	conn    *grpc.ClientConn // a client with the user agent "test-caller"
	target  string           // where it serves, for more clients (dialAs)
	mu      sync.Mutex
	lastErr error
}

func (f *front) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

func startFront(t *testing.T, b *Backend, unary bool) *front {
	t.Helper()
	f := &front{}
	h := func(_ any, s grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(s)
		var err error
		if unary {
			err = func() error {
				var req rawcodec.Frame
				if err := s.RecvMsg(&req); err != nil {
					return err
				}
				resp, err := b.Unary(s.Context(), method, req.Payload)
				if err != nil {
					return err
				}
				return s.SendMsg(&rawcodec.Frame{Payload: resp})
			}()
		} else {
			err = b.Stream(s.Context(), method, s)
		}
		f.mu.Lock()
		f.lastErr = err
		f.mu.Unlock()
		return toStatus(err)
	}
	f.target = serve(t, grpc.NewServer(grpc.ForceServerCodecV2(rawcodec.Codec{}), grpc.UnknownServiceHandler(h)))
	f.conn = dialAs(t, f.target, "test-caller")
	return f
}

// dialFront serves srv on a new Unix socket and returns a client of it, as a caller with the
// user agent "test-caller".
func dialFront(t *testing.T, srv *grpc.Server) *grpc.ClientConn {
	t.Helper()
	return dialAs(t, serve(t, srv), "test-caller")
}

// dialAs returns a client of target whose calls carry the user agent ua (grpc-go appends its
// own token), closed at cleanup.
func dialAs(t *testing.T, target, ua string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(ua))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// toStatus is the gateway's boundary in miniature: a class becomes its plain code.
func toStatus(err error) error {
	var be *backends.Error
	if errors.As(err, &be) {
		return status.Error(be.Class.Code(), be.Message)
	}
	return err
}

// asBackendError fails the test unless err is a *backends.Error.
func asBackendError(t *testing.T, err error) *backends.Error {
	t.Helper()
	var be *backends.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T) is not a *backends.Error", err, err)
	}
	return be
}
