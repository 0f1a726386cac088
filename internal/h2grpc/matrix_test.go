package h2grpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

const testMaxMsg = 8 << 20 // both sides' receive limit in the matrix: 5 MiB messages pass

// side starts one end of a call path for the matrix.
type (
	serverStarter func(t *testing.T, svc *echoService) string
	clientStarter func(t *testing.T, addr string) grpc.ClientConnInterface
)

func grpcGoServer(t *testing.T, svc *echoService) string {
	l := unixListener(t)
	s := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(svc.handle),
		grpc.MaxRecvMsgSize(testMaxMsg))
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func h2grpcServer(t *testing.T, svc *echoService) string {
	_, addr := startServer(t, ServerConfig{Handler: svc.handle, MaxRecvMsgSize: testMaxMsg})
	return addr
}

func grpcGoClient(t *testing.T, addr string) grpc.ClientConnInterface {
	return grpcClient(t, addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(testMaxMsg)))
}

func h2grpcClient(t *testing.T, addr string) grpc.ClientConnInterface {
	return newTestClient(t, addr, ClientConfig{MaxRecvMsgSize: testMaxMsg})
}

// matrixPairs are the paths every matrix case runs on; grpc-go to grpc-go proves the
// expectations are grpc-go's behaviour.
var matrixPairs = []struct {
	name   string
	server serverStarter
	client clientStarter
}{
	{"grpcgo-grpcgo", grpcGoServer, grpcGoClient},
	{"grpcgo-h2grpc", h2grpcServer, grpcGoClient},
	{"h2grpc-grpcgo", grpcGoServer, h2grpcClient},
	{"h2grpc-h2grpc", h2grpcServer, h2grpcClient},
}

var matrixCases = []struct {
	name string
	run  func(t *testing.T, cc grpc.ClientConnInterface, svc *echoService)
}{
	{"UnarySizes", testUnarySizes},
	{"Metadata", testMetadata},
	{"Status", testStatus},
	{"Deadline", testDeadline},
	{"Cancel", testCancel},
	{"ServerStreaming", testServerStreaming},
	{"ClientStreaming", testClientStreaming},
	{"Bidi", testBidi},
	{"TooLarge", testTooLarge},
	{"Concurrent", testConcurrent},
}

func TestMatrix(t *testing.T) {
	for _, p := range matrixPairs {
		t.Run(p.name, func(t *testing.T) {
			for _, c := range matrixCases {
				t.Run(c.name, func(t *testing.T) {
					svc := &echoService{blocked: make(chan error, 1)}
					cc := p.client(t, p.server(t, svc))
					c.run(t, cc, svc)
				})
			}
		})
	}
}

func testUnarySizes(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	for _, n := range []int{0, 1, 100, 16384 - 5, 16384, 65535, 1<<20 + 3, 5 << 20} {
		want := payload(n)
		var got frame
		if err := cc.Invoke(ctxTimeout(t, 20*time.Second), mUnary, &frame{b: want}, &got); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(got.b, want) {
			t.Fatalf("%d bytes: echo differs (got %d bytes)", n, len(got.b))
		}
	}
}

func testMetadata(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	bin := string([]byte{0, 1, 2, 0xff, 'x'})
	ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, 5*time.Second),
		"x-a", "one", "x-a", "two", "x-b-bin", bin, "other", "dropped")
	var hdr, trl metadata.MD
	var got frame
	if err := cc.Invoke(ctx, mUnary, &frame{b: []byte("m")}, &got, grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		md   metadata.MD
		key  string
		want []string
	}{
		{hdr, "x-a", []string{"one", "two"}},
		{hdr, "x-b-bin", []string{bin}},
		{hdr, "other", nil},
		{trl, "t-x-a", []string{"one", "two"}},
		{trl, "t-x-b-bin", []string{bin}},
		{hdr, "content-type", []string{"application/grpc+proto"}},
	}
	for _, c := range checks {
		if got := c.md.Get(c.key); !equalStrings(got, c.want) {
			t.Errorf("%s = %q, want %q (md %v)", c.key, got, c.want, c.md)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testStatus(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	withDetails, _ := status.New(codes.FailedPrecondition, "détails 100%").WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(3 * time.Second)})
	cases := []*status.Status{
		status.New(codes.NotFound, "volume \"v1\" not found"),
		status.New(codes.InvalidArgument, "héllo 100% ✓ \n\t\x01 end"),
		status.New(codes.Internal, ""),
		status.New(codes.Code(42), "a code beyond the known ones"),
		withDetails,
		status.New(codes.OK, ""),
	}
	for _, want := range cases {
		b, err := proto.Marshal(want.Proto())
		if err != nil {
			t.Fatal(err)
		}
		var got frame
		err = cc.Invoke(ctxTimeout(t, 5*time.Second), mStatus, &frame{b: b}, &got)
		if want.Code() == codes.OK {
			// The handler returned nil without a response: a unary call must see the
			// cardinality violation grpc-go reports.
			if st := status.Convert(err); st.Code() != codes.Internal || !contains(st.Message(), "cardinality violation") {
				t.Errorf("OK without a message: got %v", err)
			}
			continue
		}
		st := status.Convert(err)
		if !proto.Equal(st.Proto(), want.Proto()) {
			t.Errorf("status = %v, want %v", st.Proto(), want.Proto())
		}
	}
}

func testDeadline(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	var got frame
	if err := cc.Invoke(ctx, mDeadline, &frame{b: []byte("x")}, &got); err != nil {
		t.Fatal(err)
	}
	dl := time.Unix(0, int64(binary.BigEndian.Uint64(got.b)))
	// The server starts its clock when the request arrives: transit (slow under -race) adds.
	if d := want.Sub(dl); d < -10*time.Millisecond || d > 200*time.Millisecond {
		t.Errorf("server deadline %v, client's %v (off by %v)", dl, want, d)
	}

	// A call whose deadline passes while the handler blocks ends DeadlineExceeded on
	// both sides.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel2()
	err := cc.Invoke(ctx2, mBlock, &frame{b: []byte("x")}, &got)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("blocked call: %v, want DeadlineExceeded", err)
	}
}

func testCancel(t *testing.T, cc grpc.ClientConnInterface, svc *echoService) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, mBlock)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(&frame{b: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Header(); err != nil { // the handler runs
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-svc.blocked:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("server context: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server's context was not cancelled")
	}
	if err := cs.RecvMsg(&frame{}); status.Code(err) != codes.Canceled {
		t.Errorf("RecvMsg after cancel: %v, want Canceled", err)
	}
}

func testServerStreaming(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	cs, err := cc.NewStream(ctxTimeout(t, 10*time.Second), &grpc.StreamDesc{ServerStreams: true}, mServerStream)
	if err != nil {
		t.Fatal(err)
	}
	msg := append([]byte{7}, payload(100000)...)
	if err := cs.SendMsg(&frame{b: msg}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		var f frame
		err := cs.RecvMsg(&f)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.b, msg) {
			t.Fatal("message differs")
		}
		n++
	}
	if n != 7 {
		t.Errorf("got %d messages, want 7", n)
	}
}

func testClientStreaming(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	cs, err := cc.NewStream(ctxTimeout(t, 10*time.Second), &grpc.StreamDesc{ClientStreams: true}, mClientStream)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 10 {
		m := payload(i * 30000)
		want = append(want, m...)
		if err := cs.SendMsg(&frame{b: m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var f frame
	if err := cs.RecvMsg(&f); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.b, want) {
		t.Errorf("got %d bytes, want %d", len(f.b), len(want))
	}
	if err := cs.RecvMsg(&f); err != io.EOF {
		t.Errorf("second RecvMsg: %v, want io.EOF", err)
	}
}

func testBidi(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	cs, err := cc.NewStream(ctxTimeout(t, 20*time.Second), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, mBidi)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{1, 5 << 20, 0, 70000, 3 << 20}
	errc := make(chan error, 1)
	go func() {
		for _, n := range sizes {
			if err := cs.SendMsg(&frame{b: payload(n)}); err != nil {
				errc <- err
				return
			}
		}
		errc <- cs.CloseSend()
	}()
	for _, n := range sizes {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.b, payload(n)) {
			t.Fatalf("message of %d bytes differs (got %d)", n, len(f.b))
		}
	}
	if err := cs.RecvMsg(&frame{}); err != io.EOF {
		t.Errorf("end: %v, want io.EOF", err)
	}
	if err := <-errc; err != nil {
		t.Error(err)
	}
}

func testTooLarge(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	var got frame
	err := cc.Invoke(ctxTimeout(t, 10*time.Second), mUnary, &frame{b: payload(testMaxMsg + 1)}, &got)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !contains(st.Message(), "larger than max") {
		t.Errorf("request over the server's limit: %v", err)
	}
	err = cc.Invoke(ctxTimeout(t, 10*time.Second), mUnary, &frame{b: payload(2000)}, &got, grpc.MaxCallRecvMsgSize(1000))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !contains(st.Message(), "larger than max (2000 vs. 1000)") {
		t.Errorf("response over the client's limit: %v", err)
	}
	// The connection still works.
	if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("ok")}, &got); err != nil {
		t.Errorf("after: %v", err)
	}
}

func testConcurrent(t *testing.T, cc grpc.ClientConnInterface, _ *echoService) {
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := payload(i * 97)
			var got frame
			if err := cc.Invoke(ctxTimeout(t, 20*time.Second), mUnary, &frame{b: want}, &got); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got.b, want) {
				errs <- errors.New("echo differs")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
