package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csi-gateway/csi-gateway/internal/h2grpc"
	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

// floorEnv names the variable that makes this binary relay (f), the floor: "LISTEN TARGET",
// two socket paths. The floor is csi-gateway's own HTTP/2 server and client (internal/h2grpc,
// the gateway's default transport) with nothing between them but a raw copy of each message:
// no middleware, no metadata, no logs. What (b) costs above it is the gateway's chain; what it
// costs above haproxy is Go's transport and scheduler.
const floorEnv = "CSI_GATEWAY_BENCH_FLOOR"

// runFloorRelay serves the floor relay (floorEnv's value) until SIGTERM.
func runFloorRelay(spec string) error {
	listen, target, ok := strings.Cut(spec, " ")
	if !ok {
		return fmt.Errorf("%s=%q: want two socket paths", floorEnv, spec)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cc := h2grpc.NewClientConn(h2grpc.ClientConfig{
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", target)
		},
		Creds: insecure.NewCredentials(), Authority: "localhost", Codec: rawcodec.Codec{},
	})
	defer cc.Close()
	srv := h2grpc.NewServer(h2grpc.ServerConfig{
		Creds: insecure.NewCredentials(), Codec: rawcodec.Codec{}, Workers: 32,
		Handler: func(_ any, ss grpc.ServerStream) error { return relayFloor(cc, ss) },
	})
	return serveUnix(ctx, listen, srv, h2grpc.ErrServerStopped)
}

// relayFloor copies one call: its request to the driver, and the driver's answer (one message,
// or the stream of a SnapshotMetadata method) and status back.
func relayFloor(cc *h2grpc.ClientConn, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	ctx := ss.Context()
	var req rawcodec.Frame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	if !strings.HasPrefix(method, "/csi.v1.SnapshotMetadata/") {
		var resp rawcodec.Frame
		if err := cc.Invoke(ctx, method, &req, &resp); err != nil {
			return err
		}
		return ss.SendMsg(&resp)
	}
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&req); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	return rawcodec.EachFrame(cs, func(m *rawcodec.Frame) error { return ss.SendMsg(m) })
}
