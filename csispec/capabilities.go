package csispec

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// CapKind is one of the capability sets a CSI plugin advertises.
type CapKind uint8

const (
	PluginCaps     CapKind = iota // Identity/GetPluginCapabilities: services
	ControllerCaps                // Controller/ControllerGetCapabilities
	NodeCaps                      // Node/NodeGetCapabilities
	GroupCaps                     // GroupController/GroupControllerGetCapabilities

	// CSI v0's sets: the same RPCs of package csi.v0, whose enums number other capabilities.
	V0PluginCaps     // csi.v0 Identity/GetPluginCapabilities
	V0ControllerCaps // csi.v0 Controller/ControllerGetCapabilities
	V0NodeCaps       // csi.v0 Node/NodeGetCapabilities

	// NumCapKinds is how many kinds there are: CapKind(0) to NumCapKinds-1.
	NumCapKinds = iota
)

// CapSet is one advertised set, by enum number.
type CapSet map[int32]bool

// Capabilities is what the backends are known to advertise. Has reports whether backend
// advertises capability cap of kind; known is false when the set could not be learnt (then
// the rules do not gate by it: gating is a courtesy to the caller, the backend still refuses
// what it does not implement). ctx is the call's: an implementation may fetch the set, or ask
// again when a cached set lacks cap, within it.
type Capabilities interface {
	Has(ctx context.Context, backend string, kind CapKind, cap int32) (has, known bool)
}

// capRPC is how one kind of set is fetched and read: the RPC, and which message of each of
// its answer's capabilities holds the type that is advertised (every Get*Capabilities answer
// is capabilities[].{rpc|service}.type, in v1 as in v0). The answer's type is the RPC's
// own, found in the registry.
type capRPC struct {
	method string
	name   string            // for messages: "controller capability"
	holder protoreflect.Name // the capability's field whose type is advertised
	answer protoreflect.MessageType
}

var capRPCs = [NumCapKinds]capRPC{
	PluginCaps:       {method: "/csi.v1.Identity/GetPluginCapabilities", name: "plugin capability", holder: "service"},
	ControllerCaps:   {method: "/csi.v1.Controller/ControllerGetCapabilities", name: "controller capability", holder: "rpc"},
	NodeCaps:         {method: "/csi.v1.Node/NodeGetCapabilities", name: "node capability", holder: "rpc"},
	GroupCaps:        {method: "/csi.v1.GroupController/GroupControllerGetCapabilities", name: "group controller capability", holder: "rpc"},
	V0PluginCaps:     {method: "/csi.v0.Identity/GetPluginCapabilities", name: "v0 plugin capability", holder: "service"},
	V0ControllerCaps: {method: "/csi.v0.Controller/ControllerGetCapabilities", name: "v0 controller capability", holder: "rpc"},
	V0NodeCaps:       {method: "/csi.v0.Node/NodeGetCapabilities", name: "v0 node capability", holder: "rpc"},
}

func init() {
	for k := range capRPCs {
		capRPCs[k].answer = answerType(capRPCs[k].method)
	}
}

// answerType is the response type of method ("/csi.v1.Node/NodeGetCapabilities"). It panics
// on a method the registry lacks: capRPCs names only generated ones.
func answerType(method string) protoreflect.MessageType {
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err == nil {
		if md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name)); md != nil {
			var t protoreflect.MessageType
			if t, err = protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName()); err == nil {
				return t
			}
		}
	}
	panic(fmt.Sprintf("csispec: no answer type for %s (%v)", method, err))
}

// newMsg is a new empty answer of the RPC.
func (rpc capRPC) newMsg() proto.Message { return rpc.answer.New().Interface() }

// read returns the set a Get*Capabilities answer advertises: the type of the holder message
// of each capability that has one (a plugin's volume_expansion, say, is not a service).
func (rpc capRPC) read(m proto.Message) CapSet {
	s := CapSet{}
	msg := m.ProtoReflect()
	caps := msg.Get(msg.Descriptor().Fields().ByName("capabilities")).List()
	for i := range caps.Len() {
		c := caps.Get(i).Message()
		holder := c.Descriptor().Fields().ByName(rpc.holder)
		if holder == nil || !c.Has(holder) {
			continue
		}
		h := c.Get(holder).Message()
		s[int32(h.Get(h.Descriptor().Fields().ByName("type")).Enum())] = true
	}
	return s
}

// capName is the name the answer's enum gives capability n, as the enum's String method
// spells it (its number when the enum has no such value).
func (rpc capRPC) capName(n int32) string {
	capability := rpc.newMsg().ProtoReflect().Descriptor().Fields().ByName("capabilities").Message()
	enum := capability.Fields().ByName(rpc.holder).Message().Fields().ByName("type").Enum()
	if v := enum.Values().ByNumber(protoreflect.EnumNumber(n)); v != nil {
		return string(v.Name())
	}
	return strconv.Itoa(int(n))
}

// Method is the full method name of the RPC that fetches the set of kind k.
func (k CapKind) Method() string { return capRPCs[k].method }

// Decode reads the set of kind k from the raw answer of k's Method.
func (k CapKind) Decode(raw []byte) (CapSet, error) {
	m := capRPCs[k].newMsg()
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, err
	}
	return capRPCs[k].read(m), nil
}

// CapKindOf returns the kind of set the answer of method advertises, when method is a
// capability RPC.
func CapKindOf(method string) (CapKind, bool) {
	for k, rpc := range capRPCs {
		if rpc.method == method {
			return CapKind(k), true
		}
	}
	return 0, false
}

// Read reads the set of kind k from resp, a decoded answer of k's Method.
func (k CapKind) Read(resp proto.Message) CapSet { return capRPCs[k].read(resp) }
