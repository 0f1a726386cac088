package proxy

import (
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// echoFile is example.v1.Echo, a service the gateway does not know: built here, never in the
// test binary's protobuf registry, so only the driver's reflection can describe it.
func echoFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	msg := func(name string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: []*descriptorpb.FieldDescriptorProto{
			{Name: proto.String("text"), Number: proto.Int32(1), Type: str, JsonName: proto.String("text"),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}}}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("example/v1/echo.proto"), Package: proto.String("example.v1"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{msg("SayRequest"), msg("SayReply")},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Echo"), Method: []*descriptorpb.MethodDescriptorProto{
			{Name: proto.String("Say"), InputType: proto.String(".example.v1.SayRequest"), OutputType: proto.String(".example.v1.SayReply")}}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// echoServices lists example.v1.Echo for the driver's reflection.
type echoServices struct{}

func (echoServices) GetServiceInfo() map[string]grpc.ServiceInfo {
	return map[string]grpc.ServiceInfo{"example.v1.Echo": {}}
}

// startEchoDriver serves example.v1.Echo/Say (the reply is "echo: " and the request's text)
// and reflection of it, on a Unix socket; it returns the socket.
func startEchoDriver(t *testing.T) string {
	t.Helper()
	fd := echoFile(t)
	files := &protoregistry.Files{}
	if err := files.RegisterFile(fd); err != nil {
		t.Fatal(err)
	}
	svc := fd.Services().Get(0)
	say := func(_ any, stream grpc.ServerStream) error {
		req := dynamicpb.NewMessage(svc.Methods().Get(0).Input())
		if err := stream.RecvMsg(req); err != nil {
			return err
		}
		reply := dynamicpb.NewMessage(svc.Methods().Get(0).Output())
		text := req.Get(req.Descriptor().Fields().ByName("text")).String()
		reply.Set(reply.Descriptor().Fields().ByName("text"), protoreflect.ValueOfString("echo: "+text))
		return stream.SendMsg(reply)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(say))
	opts := reflection.ServerOptions{Services: echoServices{}, DescriptorResolver: files}
	reflectionv1.RegisterServerReflectionServer(srv, reflection.NewServerV1(opts))
	reflectionv1alpha.RegisterServerReflectionServer(srv, reflection.NewServer(opts))
	sock := filepath.Join(t.TempDir(), "driver.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return sock
}

// startReflectingGateway is a gateway routing every method to the echo driver, and to an
// embedded-like fake without reflection before it (which reflection must skip).
func startReflectingGateway(t *testing.T, tr Transport) *serverHarness {
	t.Helper()
	driver := newGRPCBackend(t, tr, startEchoDriver(t), nil, nil)
	opts := Options{
		Routes:   []Route{{Methods: []string{"/csi.v1.Identity/*"}, Backend: "fake"}, {Methods: []string{"*"}, Backend: "driver"}},
		Backends: map[string]backends.Backend{"fake": &serverFake{}, "driver": driver},
	}
	return startServerHarness(t, tr, opts, ListenerPolicy{}, slog.LevelInfo)
}

// TestReflectionMergesBackends: a service only the driver knows is listed and described by
// the gateway's reflection (from the driver's), next to the services the gateway knows, on
// both transports.
func TestReflectionMergesBackends(t *testing.T) { onEachTransport(t, testReflectionMergesBackends) }

func testReflectionMergesBackends(t *testing.T, tr Transport) {
	ts := startReflectingGateway(t, tr)
	stream, err := reflectionv1.NewServerReflectionClient(ts.conn).ServerReflectionInfo(serverCallCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectionv1.ServerReflectionRequest) *reflectionv1.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var names []string
	for _, s := range ask(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}).GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"csi.v1.Controller", "example.v1.Echo", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("ListServices = %v, missing %s", names, want)
		}
	}
	if n := len(names); n != len(slices.Compact(slices.Sorted(slices.Values(names)))) {
		t.Errorf("ListServices lists a service twice: %v", names)
	}
	resp := ask(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "example.v1.Echo"}})
	files := resp.GetFileDescriptorResponse().GetFileDescriptorProto()
	var fdp descriptorpb.FileDescriptorProto
	if len(files) != 1 || proto.Unmarshal(files[0], &fdp) != nil || fdp.GetName() != "example/v1/echo.proto" {
		t.Errorf("FileContainingSymbol(example.v1.Echo) = %v, want the driver's echo.proto", resp)
	}
	// A symbol nobody knows is the gateway's own NOT_FOUND.
	resp = ask(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "nobody.Knows"}})
	if resp.GetErrorResponse().GetErrorCode() != 5 {
		t.Errorf("FileContainingSymbol(nobody.Knows) = %v, want error code 5 (NOT_FOUND)", resp)
	}
}

// TestGrpcurlThroughMergedReflection: grpcurl, with no proto files, lists, describes and calls
// a service only the driver behind the gateway knows.
func TestGrpcurlThroughMergedReflection(t *testing.T) {
	bin := testutil.Tool(t, "GRPCURL", "grpcurl")
	onEachTransport(t, func(t *testing.T, tr Transport) {
		ts := startReflectingGateway(t, tr)
		base := []string{"-plaintext", "-unix", ts.sock}
		if out, code := testutil.RunTool(t, bin, append(base, "list")...); code != 0 || !strings.Contains(out, "example.v1.Echo\n") || !strings.Contains(out, "csi.v1.Node\n") {
			t.Errorf("grpcurl list: exit %d\n%s", code, out)
		}
		if out, code := testutil.RunTool(t, bin, "-plaintext", "-unix", "-d", `{"text":"hi"}`, ts.sock, "example.v1.Echo/Say"); code != 0 || !strings.Contains(out, `"text": "echo: hi"`) {
			t.Errorf("grpcurl example.v1.Echo/Say: exit %d\n%s", code, out)
		}
	})
}
