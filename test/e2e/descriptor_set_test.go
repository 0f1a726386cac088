package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// exampleReplicationSet is the descriptor set of a small service the gateway does not compile
// in, written as protoc --descriptor_set_out would (without --include_imports: csi.proto, which
// it imports for the csi_secret option, is the gateway's own):
//
//	package example.replication.v1;
//	service Replication { rpc EnableReplication(EnableReplicationRequest) returns (EnableReplicationResponse); }
//	message EnableReplicationRequest {
//	  string volume_id = 1;
//	  map<string, string> secrets = 2 [(csi.v1.csi_secret) = true];
//	  string credentials = 3;           // secret by configuration: no option marks it
//	  map<string, string> parameters = 4;
//	}
//	message EnableReplicationResponse {}
func exampleReplicationSet(t *testing.T) *descriptorpb.FileDescriptorSet {
	t.Helper()
	secretOpt := &descriptorpb.FieldOptions{}
	proto.SetExtension(secretOpt, csi.E_CsiSecret, true)
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	optional := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	mapEntry := func(name string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("key"), JsonName: proto.String("key"), Number: proto.Int32(1), Type: str, Label: optional},
				{Name: proto.String("value"), JsonName: proto.String("value"), Number: proto.Int32(2), Type: str, Label: optional},
			}}
	}
	mapField := func(name, jsonName, entry string, number int32, opts *descriptorpb.FieldOptions) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), JsonName: proto.String(jsonName), Number: proto.Int32(number),
			Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum(),
			TypeName: proto.String(".example.replication.v1.EnableReplicationRequest." + entry), Options: opts}
	}
	file := &descriptorpb.FileDescriptorProto{
		Name: proto.String("example/replication.proto"), Package: proto.String("example.replication.v1"),
		Dependency: []string{"csi.proto"}, Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("EnableReplicationRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("volume_id"), JsonName: proto.String("volumeId"), Number: proto.Int32(1), Type: str, Label: optional},
				mapField("secrets", "secrets", "SecretsEntry", 2, secretOpt),
				{Name: proto.String("credentials"), JsonName: proto.String("credentials"), Number: proto.Int32(3), Type: str, Label: optional},
				mapField("parameters", "parameters", "ParametersEntry", 4, nil),
			}, NestedType: []*descriptorpb.DescriptorProto{mapEntry("SecretsEntry"), mapEntry("ParametersEntry")}},
			{Name: proto.String("EnableReplicationResponse")},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Replication"), Method: []*descriptorpb.MethodDescriptorProto{{
			Name: proto.String("EnableReplication"), InputType: proto.String(".example.replication.v1.EnableReplicationRequest"),
			OutputType: proto.String(".example.replication.v1.EnableReplicationResponse"),
		}}}},
	}
	if _, err := protodesc.NewFile(file, protoregistry.GlobalFiles); err != nil {
		t.Fatalf("the example descriptor is not valid: %v", err)
	}
	return &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{file}}
}

// TestDescriptorSetSecrets: a service the gateway does not compile in, handed to it as a
// descriptor set with one secret field named by configuration (and one marked csi_secret),
// served by a driver that decodes it with dynamicpb and echoes the whole request in its
// PERMISSION_DENIED. With the set, the gateway (debug log, spans on stdout, the tap) keeps
// every canary out of the caller's error, its log and spans, the tap and /metrics, while the
// driver receives them intact and the caller gets the driver's code; without the set the call
// is forwarded untouched: the driver's message, secret and all, reaches the caller and the log
// (docs/versions.md and docs/errors.md say so).
func TestDescriptorSetSecrets(t *testing.T) {
	const method = "/example.replication.v1.Replication/EnableReplication"
	set := exampleReplicationSet(t)
	fd, err := protodesc.NewFile(set.File[0], protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Services().Get(0).Methods().Get(0)
	canaries := []string{"CANARY-ds-secret-map-4b1e", "CANARY-ds-credentials-88d0"}
	req := dynamicpb.NewMessage(md.Input())
	if err := prototext.Unmarshal([]byte(fmt.Sprintf(`volume_id: "vol-rep-1" secrets {key: "password" value: %q} credentials: %q parameters {key: "mode" value: "async"}`,
		canaries[0], canaries[1])), req); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	setFile := writeFile(t, filepath.Join(dir, "replication.pb"), string(marshal(set)))
	driver := startTestDriver(t, dir, "driver.sock", func(_ context.Context, c *driverCall, _ func([]byte) error) error {
		got := dynamicpb.NewMessage(md.Input())
		if err := proto.Unmarshal(c.Request, got); err != nil {
			return status.Errorf(codes.InvalidArgument, "cannot decode: %v", err)
		}
		return status.Errorf(codes.PermissionDenied, "bad credentials: %s", prototext.Format(got))
	})

	for _, withSet := range []bool{true, false} {
		t.Run(fmt.Sprintf("descriptorSets=%v", withSet), func(t *testing.T) {
			sub := t.TempDir()
			admin := testutil.FreeAddr(t)
			sets := ""
			if withSet {
				sets = fmt.Sprintf("descriptorSets:\n  - {file: %q, secretFields: [example.replication.v1.EnableReplicationRequest.credentials]}\n", setFile)
			}
			gw := startGatewayWith(t, sub, fmt.Sprintf(`admin: {listen: %q}
backends:
  driver: {type: grpc, target: %q}
routes:
  - {methods: ["*"], backend: driver}
logging: {level: debug}
tracing: {exporter: stdout, sampleRatio: 1}
%s`, admin, driver.Endpoint, sets))
			waitListening(t, gw.Process, admin)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			tapped := startTap(ctx, t, admin, 1)

			before := len(driver.Calls(method))
			err := gw.Conn.Invoke(ctx, method, req, dynamicpb.NewMessage(md.Output()))
			st := checkStatus(t, "EnableReplication", err, codes.PermissionDenied)
			calls := driver.Calls(method)
			if len(calls) != before+1 {
				t.Fatalf("the driver received %d calls, want 1", len(calls)-before)
			}
			for _, c := range canaries {
				if !bytes.Contains(calls[len(calls)-1].Request, []byte(c)) {
					t.Errorf("canary %s did not reach the driver intact", c)
				}
			}
			if !withSet {
				if !strings.Contains(st.Message(), canaries[1]) {
					t.Errorf("without the set the driver's message should pass untouched; got %q", st.Message())
				}
				// docs/versions.md says so too: such a call's error message is logged as written.
				waitOutput(t, gw.Process, canaries[1], 20*time.Second)
				return
			}
			sinks := map[string]string{"the caller's error": st.Message()}
			sinks["tap --output json"], _ = tapped()
			_, sinks["/metrics"], err = getHTTP("http://" + admin + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			stopAndCheckCanaries(t, gw, sinks, canaries)
			if !strings.Contains(st.Message(), "bad credentials") || !strings.Contains(st.Message(), "vol-rep-1") {
				t.Errorf("the caller's message %q lost the driver's words", st.Message())
			}
			for _, want := range []string{`"method":"EnableReplication"`, `***stripped***`, `"volume_id":"vol-rep-1"`, `async`} {
				if !strings.Contains(sinks["the gateway's log and spans"]+sinks["tap --output json"], want) {
					t.Errorf("the gateway's debug log and tap do not show %s: the call was not decoded", want)
				}
			}
		})
	}
}
