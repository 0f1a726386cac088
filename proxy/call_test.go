package proxy

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
)

// TestCallDecodesResponseOnce checks that validation and logging share one decode of the
// response, and that a replaced response is decoded anew.
func TestCallDecodesResponseOnce(t *testing.T) {
	raw, err := proto.Marshal(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1"}})
	if err != nil {
		t.Fatal(err)
	}
	call := &Call{Method: "/csi.v1.Controller/CreateVolume", info: lookupMethod("/csi.v1.Controller/CreateVolume"), Response: raw}
	first, err := decodeResponse(call)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := call.DecodedResponse(); again != first {
		t.Error("the response was decoded twice")
	}
	call.Response = []byte{} // as canonicalize answers an OK-by-table error
	empty, err := call.DecodedResponse()
	if err != nil || empty == first || empty.(*csi.CreateVolumeResponse).GetVolume() != nil {
		t.Errorf("replaced response decoded as %v, %v", empty, err)
	}
	call.Response = nil
	if none, _ := call.DecodedResponse(); none != nil {
		t.Errorf("no response decoded as %v", none)
	}
	if m, _ := decodeResponse(call); m == nil || proto.Size(m) != 0 {
		t.Errorf("validation decodes no response as %v, want the empty message", m)
	}
}
