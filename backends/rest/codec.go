package rest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// The CSI and csi-addons messages must be in the registry for their methods to be
	// found, whatever else the binary links in.
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/csi-addons/spec/lib/go/volumegroup"
)

// method is what the backend needs to know about one unary method: its names and the Go
// types of its input and output messages, all found in the protobuf registry.
type method struct {
	path    string // "/csi.v1.Controller/CreateVolume", also the path of the HTTP call
	name    string // "CreateVolume", for messages
	in, out protoreflect.MessageType
}

// errStreaming and errUnknownMethod are why a method cannot be sent.
var (
	errStreaming     = errors.New("streaming calls cannot be sent to a REST backend; route them to a grpc backend")
	errUnknownMethod = errors.New("not a method of any protobuf service this gateway knows")
)

// lookupMethod finds the unary method whose full name is path ("/package.Service/Method")
// in protoregistry.GlobalFiles and the Go types of its messages in
// protoregistry.GlobalTypes.
func lookupMethod(path string) (*method, error) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || !strings.HasPrefix(path, "/") || !protoreflect.FullName(svc).IsValid() || !protoreflect.Name(name).IsValid() {
		return nil, errUnknownMethod
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, errUnknownMethod
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, errUnknownMethod
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, errUnknownMethod
	}
	if md.IsStreamingClient() || md.IsStreamingServer() {
		return nil, errStreaming
	}
	in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, fmt.Errorf("the Go type of %s is not linked into the gateway", md.Input().FullName())
	}
	out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, fmt.Errorf("the Go type of %s is not linked into the gateway", md.Output().FullName())
	}
	return &method{path: path, name: name, in: in, out: out}, nil
}

// decodeRequest decodes the caller's request, protobuf wire bytes; protojson.Marshal turns
// it into the body of the call.
func (m *method) decodeRequest(raw []byte) (proto.Message, error) {
	msg := m.in.New().Interface()
	if err := proto.Unmarshal(raw, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// responseProto turns the appliance's protojson answer into protobuf wire bytes. Unknown
// fields are discarded, so a newer appliance may add fields. An empty body is refused
// rather than taken for the empty message: it is what a proxy or a wrong URL answers, and
// reading it as success would turn, for example, a DeleteVolume that never reached the
// appliance into a success.
func (m *method) responseProto(body []byte) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("the body is empty")
	}
	msg := m.out.New().Interface()
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, msg); err != nil {
		return nil, err
	}
	return proto.Marshal(msg)
}

// outName is the short name of the output message, such as "CreateVolumeResponse".
func (m *method) outName() string { return string(m.out.Descriptor().Name()) }
