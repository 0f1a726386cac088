package proxy

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestCallGuardWriteTimeout: on grpc-go, a server stream whose client opens no window blocks
// its handler's second SendMsg; the guard ends the call after its write timeout, with
// DEADLINE_EXCEEDED naming limits.writeTimeout. Without the guard the handler would wait
// until the client goes away.
func TestCallGuardWriteTimeout(t *testing.T) {
	g := callGuard{firstMessage: time.Minute, write: 50 * time.Millisecond}
	returned := make(chan error, 1)
	big := &rawcodec.Frame{Payload: []byte(strings.Repeat("x", 128<<10))}
	srv := grpc.NewServer(grpc.Creds(insecure.NewCredentials()), grpc.ForceServerCodecV2(rawcodec.Codec{}),
		grpc.InTapHandle(g.tap), grpc.UnknownServiceHandler(g.guard(func(_ any, ss grpc.ServerStream) error {
			var req rawcodec.Frame
			err := ss.RecvMsg(&req)
			for i := 0; err == nil && i < 3; i++ {
				err = ss.SendMsg(big)
			}
			returned <- err
			return err
		})))
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Stop()

	c, _ := testutil.DialRawH2(t, "unix", sock, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.Open(1, "/csi.v1.SnapshotMetadata/GetMetadataAllocated")
	c.SendMessage(1, nil)
	select {
	case err := <-returned:
		if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "(limits.writeTimeout)") {
			t.Errorf("the handler returned %v, want DEADLINE_EXCEEDED naming limits.writeTimeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler is still blocked in SendMsg")
	}
}

// nopStream is a grpc.ServerStream whose messages go nowhere.
type nopStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s nopStream) Context() context.Context { return s.ctx }
func (nopStream) RecvMsg(any) error          { return nil }
func (nopStream) SendMsg(any) error          { return nil }

// BenchmarkCallGuard is what the guard costs a unary call on grpc-go: its context, its two
// timers and its stream wrapper.
func BenchmarkCallGuard(b *testing.B) {
	g := callGuard{firstMessage: 10 * time.Second, write: 30 * time.Second}
	h := g.guard(func(_ any, ss grpc.ServerStream) error {
		var f rawcodec.Frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		return ss.SendMsg(&f)
	})
	b.ReportAllocs()
	for b.Loop() {
		ctx, _ := g.tap(context.Background(), nil)
		if err := h(nil, nopStream{ctx: ctx}); err != nil {
			b.Fatal(err)
		}
	}
}
