package translate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/csi-gateway/csi-gateway/backends"
)

// rpc is the translation of one caller's method: it decodes the caller's request, calls the
// backend in its own version and encodes the answer in the caller's.
type rpc struct {
	call func(ctx context.Context, b *Backend, req []byte) ([]byte, error)
}

// crossError is a conversion's refusal: what the caller asked for (or the backend answered)
// has no equivalent in the other version, or the backend's answer says the operation failed.
type crossError struct {
	class backends.Class
	msg   string
}

func (e *crossError) Error() string { return e.msg }

// cannotCross refuses a request that needs what the backend's version lacks.
func cannotCross(format string, args ...any) error {
	return &crossError{class: backends.ClassInvalid, msg: fmt.Sprintf(format, args...)}
}

// answered is a conversion that answers the caller itself, without calling the backend
// (ValidateVolumeCapabilities of a capability the other version cannot express: not
// confirmed).
type answered struct{ resp proto.Message }

func (a *answered) Error() string { return "answered by the translation" }

// conversion turns m, a message of one version, into its counterpart in the other, a new
// message of type to: a request (req is nil) or the backend's answer (req is the caller's
// request).
type conversion func(m, req proto.Message, to protoreflect.MessageType) (proto.Message, error)

// byFields is the conversion of a message whose fields all cross as they are (crossFields).
func byFields(m, _ proto.Message, to protoreflect.MessageType) (proto.Message, error) {
	out := to.New().Interface()
	crossFields(m, out)
	return out, nil
}

// request is the conversion of a request by f.
func request[From, To proto.Message](f func(From) (To, error)) conversion {
	return func(m, _ proto.Message, _ protoreflect.MessageType) (proto.Message, error) { return f(m.(From)) }
}

// answer is the conversion of an answer by f, which cannot fail.
func answer[From, To proto.Message](f func(From) To) conversion {
	return func(m, _ proto.Message, _ protoreflect.MessageType) (proto.Message, error) { return f(m.(From)), nil }
}

// answerTo is the conversion of an answer by f, given the caller's request.
func answerTo[From, Req, To proto.Message](f func(From, Req) (To, error)) conversion {
	return func(m, req proto.Message, _ protoreflect.MessageType) (proto.Message, error) {
		return f(m.(From), req.(Req))
	}
}

// listed is the conversion of a List answer: next_token as it is, and each entry's item (its
// field item, a volume or a snapshot) converted by f; nothing else of an entry crosses.
func listed[From, To proto.Message](item protoreflect.Name, f func(From) To) conversion {
	return func(m, _ proto.Message, to protoreflect.MessageType) (proto.Message, error) {
		out := to.New()
		crossFields(m, out.Interface())
		src := m.ProtoReflect()
		from := src.Get(src.Descriptor().Fields().ByName("entries")).List()
		entries := out.Descriptor().Fields().ByName("entries")
		for i := range from.Len() {
			e, list := from.Get(i).Message(), out.Mutable(entries).List()
			de := list.NewElement().Message()
			if fd := e.Descriptor().Fields().ByName(item); e.Has(fd) {
				de.Set(de.Descriptor().Fields().ByName(item), protoreflect.ValueOfMessage(f(e.Get(fd).Message().Interface().(From)).ProtoReflect()))
			}
			list.Append(protoreflect.ValueOfMessage(de))
		}
		return out.Interface(), nil
	}
}

// convert is the rpc of caller, a full method name, that the backend serves as its method
// target: down converts the caller's request, up the backend's answer (given the caller's
// request). The messages' types are the methods' own, found in the registry.
func convert(caller, target string, down, up conversion) rpc {
	callerReq, callerResp := methodTypes(caller)
	targetReq, targetResp := methodTypes(target)
	return rpc{call: func(ctx context.Context, b *Backend, raw []byte) ([]byte, error) {
		in := callerReq.New().Interface()
		if err := proto.Unmarshal(raw, in); err != nil {
			return nil, backends.Errorf(backends.ClassInvalid, "csi-gateway: the request is not a valid %s: %v",
				callerReq.Descriptor().FullName(), err)
		}
		out, err := down(in, nil, targetReq)
		if err != nil {
			return b.refusal(err)
		}
		resp := targetResp.New().Interface()
		if err := send(ctx, b, target, out, resp); err != nil {
			return nil, err
		}
		answer, err := up(resp, in, callerResp)
		if err != nil {
			return b.refusal(err)
		}
		return proto.Marshal(answer)
	}}
}

// methodTypes are the request and response types of method ("/csi.v1.Node/NodeGetInfo").
// It panics on a method the registry lacks: the translation tables name only generated ones.
func methodTypes(method string) (req, resp protoreflect.MessageType) {
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		panic("translate: " + method + ": " + err.Error())
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	if md == nil {
		panic("translate: no method " + method)
	}
	return messageType(md.Input().FullName()), messageType(md.Output().FullName())
}

func messageType(name protoreflect.FullName) protoreflect.MessageType {
	t, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		panic("translate: " + string(name) + ": " + err.Error())
	}
	return t
}

// send calls target on the wrapped backend with req and decodes its answer into resp.
func send(ctx context.Context, b *Backend, target string, req, resp proto.Message) error {
	wire, err := proto.Marshal(req)
	if err != nil {
		return backends.Errorf(backends.ClassInternal, "csi-gateway: encoding the translated %s: %v", target, err)
	}
	raw, err := b.inner.Unary(ctx, target, wire)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(raw, resp); err != nil {
		return backends.Errorf(backends.ClassInternal, "backend %q: the answer to %s is not a valid %s: %v",
			b.name, target, resp.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// refusal is the caller's answer to a conversion's error: a crossError as a classified error
// naming the backend, an answered as its response.
func (b *Backend) refusal(err error) ([]byte, error) {
	var a *answered
	if errors.As(err, &a) {
		return proto.Marshal(a.resp)
	}
	var ce *crossError
	if errors.As(err, &ce) {
		return nil, backends.Errorf(ce.class, "backend %q: %s", b.name, ce.msg)
	}
	return nil, err
}
