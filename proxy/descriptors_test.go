package proxy

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestDescriptorSetMethods: a set's services become methods the gateway decodes (dynamic
// messages, not CSI), the compiled-in services a set carries along (csi.proto) keep their
// compiled-in description, and a secret field the set does not have is refused by name.
func TestDescriptorSetMethods(t *testing.T) {
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{
		protodesc.ToFileDescriptorProto(csi.File_csi_proto),
		protodesc.ToFileDescriptorProto(grpc_health_v1.File_grpc_health_v1_health_proto),
	}}
	ds, err := NewDescriptorSet("test.pb", set, []string{"grpc.health.v1.HealthCheckRequest.service"})
	if err != nil {
		t.Fatal(err)
	}
	table := newMethodTable(ds)
	info := table["/grpc.health.v1.Health/Check"]
	if info == nil || !info.notCSI || info.tenantScoped || info.input.Descriptor().FullName() != "grpc.health.v1.HealthCheckRequest" {
		t.Fatalf("Health/Check from the set: %+v", info)
	}
	if info := table["/csi.v1.Controller/CreateVolume"]; info == nil || info.notCSI || !info.tenantScoped {
		t.Errorf("csi.v1's CreateVolume lost its compiled-in description: %+v", info)
	}
	if _, err := NewDescriptorSet("test.pb", set, []string{"grpc.health.v1.HealthCheckRequest.nope"}); err == nil ||
		!strings.Contains(err.Error(), `secret field "grpc.health.v1.HealthCheckRequest.nope" is not a field of the set`) {
		t.Errorf("an unknown secret field: %v", err)
	}
}
