package grpcbackend

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-gateway/csi-gateway/backends"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

func TestStreamServerStreaming(t *testing.T) {
	d := startDriver(t)
	f := startFront(t, newBackend(t, d.target), false)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-custom", "v1")
	req := &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1", MaxResults: 1}
	s, err := csi.NewSnapshotMetadataClient(f.conn).GetMetadataAllocated(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var got []*csi.GetMetadataAllocatedResponse
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv after %d frames: %v", len(got), err)
		}
		got = append(got, r)
	}
	if len(got) != 3 {
		t.Fatalf("got %d frames, want 3", len(got))
	}
	for i, r := range got {
		if off := r.GetBlockMetadata()[0].GetByteOffset(); off != int64(i)<<20 {
			t.Errorf("frame %d: offset %d, want %d", i, off, int64(i)<<20)
		}
	}
	if h, _ := s.Header(); len(h.Get("x-driver-header")) != 1 {
		t.Errorf("header %v lacks x-driver-header", h)
	}
	if tr := s.Trailer(); len(tr.Get("x-driver-trailer")) != 1 {
		t.Errorf("trailer %v lacks x-driver-trailer", tr)
	}
	md, _, hasDeadline := d.seen()
	if len(md.Get("x-custom")) != 1 || !hasDeadline {
		t.Errorf("driver saw metadata %v, deadline %v", md, hasDeadline)
	}
	// The request frame reached the driver byte for byte.
	raw := d.codec.received()
	if want, _ := proto.Marshal(req); len(raw) != 1 || string(raw[0]) != string(want) {
		t.Errorf("driver received %x, want %x", raw, want)
	}
	if err := f.err(); err != nil {
		t.Errorf("Stream returned %v", err)
	}
}

func TestStreamUnknownService(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	f := startFront(t, b, false)

	resp, err := healthpb.NewHealthClient(f.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v, want SERVING", resp.GetStatus())
	}
	if err := f.err(); err != nil {
		t.Fatalf("Stream returned %v", err)
	}
}

func TestStreamCountsOneAttempt(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	var attempts int
	h := func(_ any, s grpc.ServerStream) error {
		ctx, ci := backends.WithCallInfo(s.Context())
		method, _ := grpc.MethodFromServerStream(s)
		err := b.Stream(ctx, method, s)
		attempts = ci.Attempts()
		return toStatus(err)
	}
	conn := dialFront(t, grpc.NewServer(grpc.ForceServerCodecV2(rawcodec.Codec{}), grpc.UnknownServiceHandler(h)))
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 {
		t.Fatalf("attempts %d, want 1", attempts)
	}
}

func TestStreamErrors(t *testing.T) {
	d := startDriver(t)
	down := "unix://" + socketPath(t, "missing.sock")

	tests := []struct {
		name    string
		target  string
		call    func(ctx context.Context, conn *grpc.ClientConn) error
		code    codes.Code
		class   backends.Class
		message string // prefix
	}{
		{
			name:   "driver status",
			target: d.target,
			call: func(ctx context.Context, conn *grpc.ClientConn) error {
				_, err := csi.NewControllerClient(conn).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "code-5"})
				return err
			},
			code: codes.NotFound, class: backends.ClassNotFound, message: `backend "drv": driver says NotFound`,
		},
		{
			name:   "method the driver lacks",
			target: d.target,
			call: func(ctx context.Context, conn *grpc.ClientConn) error {
				_, err := csi.NewControllerClient(conn).ListVolumes(ctx, &csi.ListVolumesRequest{})
				return err
			},
			code: codes.Unimplemented, class: backends.ClassUnimplemented, message: `backend "drv": method ListVolumes not implemented`,
		},
		{
			name:   "driver down",
			target: down,
			call: func(ctx context.Context, conn *grpc.ClientConn) error {
				_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
				return err
			},
			code: codes.Unavailable, class: backends.ClassUnavailable, message: `backend "drv": cannot reach the driver at ` + down,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFront(t, newBackend(t, tt.target), false)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tt.call(ctx, f.conn)
			if st := status.Convert(err); st.Code() != tt.code || !strings.HasPrefix(st.Message(), tt.message) {
				t.Errorf("caller got %v %q, want %v %q…", st.Code(), st.Message(), tt.code, tt.message)
			}
			be := asBackendError(t, f.err())
			if be.Class != tt.class {
				t.Errorf("class %v, want %v", be.Class, tt.class)
			}
		})
	}
}

func TestStreamCallerGoesAway(t *testing.T) {
	d := startDriver(t)
	f := startFront(t, newBackend(t, d.target), false)

	ctx, cancel := context.WithCancel(context.Background())
	s, err := csi.NewSnapshotMetadataClient(f.conn).GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{SnapshotId: "block"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("first frame: %v", err)
	}
	cancel()
	if _, err := s.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Recv after cancel: %v", err)
	}
	// The front's handler ends shortly after the caller leaves.
	deadline := time.Now().Add(5 * time.Second)
	for f.err() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	be := asBackendError(t, f.err())
	if be.Class != backends.ClassCanceled || !strings.HasPrefix(be.Message, `backend "drv": `) {
		t.Fatalf("got %v %q, want canceled", be.Class, be.Message)
	}
}

func TestStreamCallerRequestTooLarge(t *testing.T) {
	d := startDriver(t)
	b := newBackend(t, d.target)
	errc := make(chan error, 1)
	h := func(_ any, s grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(s)
		err := b.Stream(s.Context(), method, s)
		errc <- err
		return toStatus(err)
	}
	conn := dialFront(t, grpc.NewServer(grpc.ForceServerCodecV2(rawcodec.Codec{}), grpc.MaxRecvMsgSize(1024), grpc.UnknownServiceHandler(h)))
	_, err := csi.NewControllerClient(conn).CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: strings.Repeat("n", 4096)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("caller got %v, want ResourceExhausted", err)
	}
	be := asBackendError(t, <-errc)
	const prefix = `backend "drv": reading the caller's request: grpc: received message larger than max`
	if be.Class != backends.ClassExhausted || !strings.HasPrefix(be.Message, prefix) {
		t.Fatalf("got %v %q, want exhausted %q…", be.Class, be.Message, prefix)
	}
	if got := d.codec.received(); len(got) != 0 {
		t.Fatalf("the driver received %d messages", len(got))
	}
}
