package rest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

// withUnknown appends field num (a string) to the wire bytes of a message.
func withUnknown(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// TestUnknownFieldsRefused sends requests holding fields CSI v1.13 does not have, at the top
// and nested, to a real HTTP server: each is refused with ClassInvalid naming where the
// fields are, and never sent.
func TestUnknownFieldsRefused(t *testing.T) {
	capability := withUnknown(withUnknown(mustMarshal(t, &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}), 90, "x"), 90, "again")
	nested := protowire.AppendTag(mustMarshal(t, &csi.CreateVolumeRequest{Name: "pvc-1"}), 3, protowire.BytesType)
	nested = protowire.AppendBytes(nested, capability)
	many := mustMarshal(t, &csi.CreateVolumeRequest{Name: "pvc-1"})
	for n := range protowire.Number(10) {
		many = withUnknown(many, 100+n, "v")
	}
	tests := []struct {
		name string
		req  []byte
		want []string
	}{
		{"top level", withUnknown(withUnknown(mustMarshal(t, &csi.CreateVolumeRequest{Name: "pvc-1"}), 42, "new"), 43, "newer"),
			[]string{"csi.v1.CreateVolumeRequest does not know (field 42, field 43)"}},
		{"nested, repeated number named once", nested, []string{"(volume_capabilities[0]: field 90)"}},
		{"many", many, []string{"field 100, field 101", "field 107 and 2 more)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, reply(http.StatusOK, "application/json", created))
			b := newBackend(t, Config{}, s.URL)
			ctx, _ := callContext(t)
			_, err := b.Unary(ctx, createPath, tt.req)
			e := checkError(t, err, backends.ClassInvalid, append(tt.want, "backend \"array1\": CreateVolume:",
				"route /csi.v1.Controller/CreateVolume to a grpc backend")...)
			if e != nil && strings.Count(e.Message, "field 90") > 1 {
				t.Errorf("message %q names field 90 twice", e.Message)
			}
			if n := s.hits.Load(); n != 0 {
				t.Errorf("the appliance got %d requests, want none", n)
			}
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
