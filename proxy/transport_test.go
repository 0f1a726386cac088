package proxy

import (
	"context"
	"log/slog"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/csi-gateway/csi-gateway/backends"
)

// TestParseTransport: the names, the default, and a clear error for anything else.
func TestParseTransport(t *testing.T) {
	for in, want := range map[string]Transport{"": TransportGRPC, "frames": TransportFrames, "grpc": TransportGRPC} {
		if got, err := ParseTransport(in); err != nil || got != want {
			t.Errorf("ParseTransport(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseTransport("http2"); err == nil || err.Error() != `"http2" is not frames or grpc` {
		t.Errorf("ParseTransport(http2) = %v", err)
	}
}

// onEachTransport runs test once on each listener transport, as the subtests "grpc" (the
// default) and "frames": every test whose calls go through a listener runs this way, so both
// transports are held to the same tests.
func onEachTransport(t *testing.T, test func(t *testing.T, tr Transport)) {
	for _, tr := range []Transport{TransportGRPC, TransportFrames} {
		t.Run(string(tr), func(t *testing.T) { test(t, tr) })
	}
}

// TestTransportsServeAlike: on either transport a caller gets the same answers — a unary
// call forwarded, a backend error with its code and message, a method the gateway does not
// know handed to the backend as a stream — and the log names the caller by its peer
// credentials.
func TestTransportsServeAlike(t *testing.T) { onEachTransport(t, testTransportsServeAlike) }

func testTransportsServeAlike(t *testing.T, tr Transport) {
	fake := &serverFake{answer: func(_ context.Context, method string, _ []byte) ([]byte, error) {
		if method != "/csi.v1.Controller/CreateVolume" {
			return nil, backends.Errorf(backends.ClassNotFound, `backend "fake": volume vol-gone does not exist`)
		}
		return proto.Marshal(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1"}})
	}}
	ts := startServerHarness(t, tr, serverFakeOptions(fake), ListenerPolicy{}, slog.LevelInfo)
	client := csi.NewControllerClient(ts.conn)

	got, err := client.CreateVolume(serverCallCtx(t), serverCreateVolumeRequest("pvc-1"))
	if err != nil || got.GetVolume().GetVolumeId() != "vol-1" {
		t.Fatalf("CreateVolume = %v, %v", got, err)
	}
	_, err = client.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-gone"})
	if err != nil { // NOT_FOUND from a delete is success (canonicalize)
		t.Errorf("DeleteVolume: %v", err)
	}
	_, err = client.ControllerGetVolume(serverCallCtx(t), &csi.ControllerGetVolumeRequest{VolumeId: "vol-gone"})
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != `backend "fake": volume vol-gone does not exist` {
		t.Errorf("ControllerGetVolume: %v %q", st.Code(), st.Message())
	}
	err = ts.conn.Invoke(serverCallCtx(t), "/example.v1.Storage/Wipe", &emptypb.Empty{}, &emptypb.Empty{})
	if st := status.Convert(err); st.Code() != codes.Unimplemented || st.Message() != `backend "fake": no streams here (/example.v1.Storage/Wipe)` {
		t.Errorf("unknown method: %v %q", st.Code(), st.Message())
	}
	lines := ts.log.lines(t, "call")
	if len(lines) != 4 {
		t.Fatalf("%d call lines, want 4; log:\n%s", len(lines), ts.log)
	}
	for i, line := range lines {
		if line["caller"] != serverCaller() {
			t.Errorf("line %d: caller %v, want %s", i+1, line["caller"], serverCaller())
		}
	}
}
