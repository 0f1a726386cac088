package rest

import (
	"errors"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
)

func TestLookupMethod(t *testing.T) {
	tests := []struct {
		path    string
		err     error // nil: found
		in, out string
	}{
		{"/csi.v1.Controller/CreateVolume", nil, "csi.v1.CreateVolumeRequest", "csi.v1.CreateVolumeResponse"},
		{"/csi.v1.Identity/Probe", nil, "csi.v1.ProbeRequest", "csi.v1.ProbeResponse"},
		{"/csi.v1.Node/NodeGetInfo", nil, "csi.v1.NodeGetInfoRequest", "csi.v1.NodeGetInfoResponse"},
		{"/csi.v1.GroupController/CreateVolumeGroupSnapshot", nil, "csi.v1.CreateVolumeGroupSnapshotRequest", "csi.v1.CreateVolumeGroupSnapshotResponse"},
		{"/volumegroup.Controller/CreateVolumeGroup", nil, "volumegroup.CreateVolumeGroupRequest", "volumegroup.CreateVolumeGroupResponse"},
		{"/csi.v1.SnapshotMetadata/GetMetadataAllocated", errStreaming, "", ""},
		{"/csi.v1.Controller/NoSuchMethod", errUnknownMethod, "", ""},
		{"/csi.v1.Nope/CreateVolume", errUnknownMethod, "", ""},
		{"/csi.v1.CreateVolumeRequest/CreateVolume", errUnknownMethod, "", ""}, // a message, not a service
		{"csi.v1.Controller/CreateVolume", errUnknownMethod, "", ""},
		{"/csi.v1.Controller/CreateVolume/x", errUnknownMethod, "", ""},
		{"/csi.v1.Controller", errUnknownMethod, "", ""},
		{"", errUnknownMethod, "", ""},
		{"/../Controller/CreateVolume", errUnknownMethod, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			m, err := lookupMethod(tt.path)
			if !errors.Is(err, tt.err) {
				t.Fatalf("lookupMethod: %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if got := string(m.in.Descriptor().FullName()); got != tt.in {
				t.Errorf("input %s, want %s", got, tt.in)
			}
			if got := string(m.out.Descriptor().FullName()); got != tt.out {
				t.Errorf("output %s, want %s", got, tt.out)
			}
			if m.path != tt.path {
				t.Errorf("path %q, want %q", m.path, tt.path)
			}
		})
	}
}

func TestCodecRoundTrip(t *testing.T) {
	m, err := lookupMethod("/csi.v1.Controller/ControllerGetVolume")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := proto.Marshal(&csi.ControllerGetVolumeRequest{VolumeId: "vol-1"})
	req, err := m.decodeRequest(raw)
	if err != nil || !proto.Equal(req, &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"}) {
		t.Fatalf("decodeRequest: %v, %v", req, err)
	}
	if _, err := m.decodeRequest([]byte{0xff, 0xff}); err == nil {
		t.Error("decodeRequest accepted bytes that are not a message")
	}

	out, err := m.responseProto([]byte(`{"volume":{"volumeId":"vol-1","capacityBytes":"42","fromTheFuture":{"x":1}},"alsoNew":true}`))
	if err != nil {
		t.Fatalf("responseProto with unknown fields: %v", err)
	}
	var got csi.ControllerGetVolumeResponse
	if err := proto.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.GetVolume().GetVolumeId() != "vol-1" || got.GetVolume().GetCapacityBytes() != 42 {
		t.Errorf("decoded %v", &got)
	}
	for _, body := range []string{"", "  \n", "null", "[]", `{"volume":5}`, "<html>"} {
		if _, err := m.responseProto([]byte(body)); err == nil {
			t.Errorf("responseProto(%q) succeeded", body)
		}
	}
}
