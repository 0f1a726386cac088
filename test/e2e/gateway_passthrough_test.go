package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

// Methods of the passthrough test's driver.
const (
	ptCreateVolume  = "/csi.v1.Controller/CreateVolume"
	ptDeleteVolume  = "/csi.v1.Controller/DeleteVolume"
	ptGetVolume     = "/csi.v1.Controller/ControllerGetVolume"
	ptAllocated     = "/csi.v1.SnapshotMetadata/GetMetadataAllocated"
	ptVendorExplode = "/example.vendor.v1.Vendor/Explode"
	ptVendorEcho    = "/example.vendor.v1.Vendor/Echo"
	ptDataLossMsg   = "vendor: block 42 of pool p0 lost; restore it from the last backup (see KB-1234)"
)

// ptFrames are the response frames of the driver's GetMetadataAllocated stream.
var ptFrames = []*csi.GetMetadataAllocatedResponse{
	{BlockMetadataType: csi.BlockMetadataType_FIXED_LENGTH, VolumeCapacityBytes: 1 << 30,
		BlockMetadata: []*csi.BlockMetadata{{ByteOffset: 0, SizeBytes: 4096}, {ByteOffset: 8192, SizeBytes: 4096}}},
	{BlockMetadataType: csi.BlockMetadataType_FIXED_LENGTH, VolumeCapacityBytes: 1 << 30,
		BlockMetadata: []*csi.BlockMetadata{{ByteOffset: 1 << 20, SizeBytes: 4096}}},
	{BlockMetadataType: csi.BlockMetadataType_FIXED_LENGTH, VolumeCapacityBytes: 1 << 30,
		BlockMetadata: []*csi.BlockMetadata{{ByteOffset: 1 << 29, SizeBytes: 4096}}},
}

// TestGatewayPassthrough checks, through the real gateway binary and a grpc backend, what a
// passthrough must leave alone: methods of services the gateway does not know (a vendor
// service; grpc health is the gateway's own since it answers health itself) with their statuses, request and response bytes including fields of a
// newer spec, metadata both ways and the deadline, and server streams; and what it must
// change: unrouted methods and the CSI spec's idempotent deletes. It runs on both of the
// gateway's transports.
func TestGatewayPassthrough(t *testing.T) { onEachTransport(t, testGatewayPassthrough) }

func testGatewayPassthrough(t *testing.T, transport string) {
	began := time.Now()
	dir := t.TempDir()
	respCreate := appendUnknown(marshal(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-pt", CapacityBytes: 1 << 20}}),
		998, "a response field of a newer spec")
	driver := startTestDriver(t, dir, "driver.sock", func(ctx context.Context, c *driverCall, send func([]byte) error) error {
		switch c.Method {
		case ptCreateVolume:
			grpc.SetHeader(ctx, metadata.Pairs("x-driver-header", "h-1"))
			grpc.SetTrailer(ctx, metadata.Pairs("x-driver-trailer", "t-create"))
			return send(respCreate)
		case ptDeleteVolume, ptGetVolume:
			return status.Error(codes.NotFound, "volume vol-gone does not exist on array a1")
		case ptAllocated:
			grpc.SetTrailer(ctx, metadata.Pairs("x-driver-trailer", "t-stream"))
			for _, f := range ptFrames {
				if err := send(marshal(f)); err != nil {
					return err
				}
			}
			return nil
		case ptVendorExplode:
			return status.Error(codes.DataLoss, ptDataLossMsg)
		case ptVendorEcho:
			return send(c.Request)
		}
		return nil
	})
	gw := startGatewayWith(t, dir, "transport: "+transport+"\n"+noValidation+fmt.Sprintf(`backends:
  driver: {type: grpc, target: %q}
routes:
  - methods: ["/csi.v1.Identity/*", "/csi.v1.Controller/*", "/csi.v1.SnapshotMetadata/*", "/example.vendor.v1.Vendor/*"]
    backend: driver
`, driver.Endpoint))
	direct, err := grpc.NewClient(driver.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("unknown services pass through untouched", func(t *testing.T) {
		var resp rawcodec.Frame
		err := gw.Conn.Invoke(ctx, ptVendorExplode, &rawcodec.Frame{Payload: []byte("\x0a\x03abc")}, &resp, grpc.ForceCodecV2(rawcodec.Codec{}))
		if st := status.Convert(err); st.Code() != codes.DataLoss || st.Message() != ptDataLossMsg {
			t.Errorf("%s: %s %q, want exactly the driver's DATA_LOSS %q", ptVendorExplode, st.Code(), st.Message(), ptDataLossMsg)
		}
		req := appendUnknown([]byte("\x0a\x05hello"), 7777, "vendor bytes")
		if err := gw.Conn.Invoke(ctx, ptVendorEcho, &rawcodec.Frame{Payload: req}, &resp, grpc.ForceCodecV2(rawcodec.Codec{})); err != nil {
			t.Fatalf("%s: %v", ptVendorEcho, err)
		}
		if !bytes.Equal(resp.Payload, req) {
			t.Errorf("%s: got back % x, want % x", ptVendorEcho, resp.Payload, req)
		}
	})

	t.Run("bytes and metadata pass through", func(t *testing.T) {
		req := appendUnknown(marshal(&csi.CreateVolumeRequest{Name: "pt-1", VolumeCapabilities: []*csi.VolumeCapability{mountCapability()},
			Parameters: map[string]string{"tier": "gold", "zone": "a"}}), 999, "a request field of a newer spec")
		callCtx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "x-e2e-caller", "blue"), 30*time.Second)
		defer cancel()
		wantDeadline, _ := callCtx.Deadline()
		var header, trailer metadata.MD
		var resp rawcodec.Frame
		err := gw.Conn.Invoke(callCtx, ptCreateVolume, &rawcodec.Frame{Payload: req}, &resp, grpc.ForceCodecV2(rawcodec.Codec{}),
			grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatalf("CreateVolume: %v", err)
		}
		calls := driver.Calls(ptCreateVolume)
		if len(calls) != 1 {
			t.Fatalf("the driver received %d CreateVolume calls, want 1", len(calls))
		}
		c := calls[0]
		if !bytes.Equal(c.Request, req) {
			t.Errorf("the driver received % x\nwant % x", c.Request, req)
		}
		if !bytes.Equal(resp.Payload, respCreate) {
			t.Errorf("the caller received % x\nwant the driver's % x", resp.Payload, respCreate)
		}
		if got := c.MD.Get("x-e2e-caller"); !slices.Equal(got, []string{"blue"}) {
			t.Errorf("the driver saw x-e2e-caller %q, want [blue]", got)
		}
		if c.Deadline.IsZero() || c.Deadline.After(wantDeadline.Add(time.Second)) || c.Deadline.Before(c.Received) {
			t.Errorf("the driver saw deadline %v (received at %v); the caller's is %v", c.Deadline, c.Received, wantDeadline)
		}
		if got := trailer.Get("x-driver-trailer"); !slices.Equal(got, []string{"t-create"}) {
			t.Errorf("the caller got trailer x-driver-trailer %q, want [t-create] (trailer %v)", got, trailer)
		}
		if got := header.Get("x-driver-header"); !slices.Equal(got, []string{"h-1"}) {
			t.Errorf("the caller got header x-driver-header %q, want [h-1] (header %v)", got, header)
		}
	})

	t.Run("a server stream arrives whole", func(t *testing.T) {
		req := &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1", StartingOffset: 0, MaxResults: 2,
			Secrets: map[string]string{"password": "not-a-canary-here"}}
		var trailer metadata.MD
		got, err := invoke(ctx, gw.Conn, ptAllocated, req, grpc.Trailer(&trailer))
		if err != nil {
			t.Fatalf("GetMetadataAllocated: %v", err)
		}
		if len(got) != len(ptFrames) {
			t.Fatalf("GetMetadataAllocated: %d frames, want %d", len(got), len(ptFrames))
		}
		for i := range got {
			if !proto.Equal(got[i], ptFrames[i]) {
				t.Errorf("frame %d: %v, want %v", i, got[i], ptFrames[i])
			}
		}
		if calls := driver.Calls(ptAllocated); len(calls) != 1 || !bytes.Equal(calls[0].Request, marshal(req)) {
			t.Errorf("the driver did not receive the stream's request as sent")
		}
		if v := trailer.Get("x-driver-trailer"); !slices.Equal(v, []string{"t-stream"}) {
			t.Errorf("the stream's trailer x-driver-trailer is %q, want [t-stream]", v)
		}
	})

	t.Run("a method no route matches is unimplemented", func(t *testing.T) {
		for _, m := range []string{"/csi.v1.Node/NodeGetInfo", "/example.other.v1.Other/Do"} {
			var resp rawcodec.Frame
			err := gw.Conn.Invoke(ctx, m, &rawcodec.Frame{}, &resp, grpc.ForceCodecV2(rawcodec.Codec{}))
			st := checkStatus(t, m, err, codes.Unimplemented)
			if !strings.Contains(st.Message(), m) {
				t.Errorf("%s: the message %q does not name the method", m, st.Message())
			}
		}
		if n := len(driver.Calls("/csi.v1.Node/NodeGetInfo")); n != 0 {
			t.Errorf("the driver received %d unrouted calls", n)
		}
	})

	t.Run("CSI errors are canonicalized", func(t *testing.T) {
		ctl := csi.NewControllerClient(gw.Conn)
		resp, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-gone"})
		if err != nil || !proto.Equal(resp, &csi.DeleteVolumeResponse{}) {
			t.Errorf("DeleteVolume of a volume the driver does not know: %v, %v; want OK with an empty response", resp, err)
		}
		var raw rawcodec.Frame
		if err := gw.Conn.Invoke(ctx, ptDeleteVolume, &rawcodec.Frame{Payload: marshal(&csi.DeleteVolumeRequest{VolumeId: "vol-gone"})}, &raw,
			grpc.ForceCodecV2(rawcodec.Codec{})); err != nil || len(raw.Payload) != 0 {
			t.Errorf("DeleteVolume of a volume the driver does not know, raw: % x, %v; want OK and no bytes", raw.Payload, err)
		}
		_, err = ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "vol-gone"})
		st := checkStatus(t, "ControllerGetVolume of a volume the driver does not know", err, codes.NotFound)
		if !strings.Contains(st.Message(), "volume vol-gone does not exist on array a1") {
			t.Errorf("ControllerGetVolume: the message %q lost the driver's words", st.Message())
		}
	})
	t.Logf("passthrough checks took %v", time.Since(began).Round(time.Millisecond))
}

// appendUnknown appends a length-delimited field num holding s to a message's wire bytes, as
// a peer built from a newer .proto would send it.
func appendUnknown(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
