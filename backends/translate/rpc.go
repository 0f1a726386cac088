package translate

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

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

// convert is the rpc of a caller's method that the backend serves as its method target:
// down converts the caller's request, up the backend's answer (given the caller's request).
func convert[CReq, CResp, BReq, BResp proto.Message](target string, down func(CReq) (BReq, error), up func(BResp, CReq) (CResp, error)) rpc {
	return rpc{call: func(ctx context.Context, b *Backend, raw []byte) ([]byte, error) {
		in := newMessage[CReq]()
		if err := proto.Unmarshal(raw, in); err != nil {
			return nil, backends.Errorf(backends.ClassInvalid, "csi-gateway: the request is not a valid %s: %v",
				in.ProtoReflect().Descriptor().FullName(), err)
		}
		out, err := down(in)
		if err != nil {
			return b.refusal(err)
		}
		resp, err := send[BResp](ctx, b, target, out)
		if err != nil {
			return nil, err
		}
		answer, err := up(resp, in)
		if err != nil {
			return b.refusal(err)
		}
		return proto.Marshal(answer)
	}}
}

// send calls target on the wrapped backend with req and decodes its answer.
func send[BResp proto.Message](ctx context.Context, b *Backend, target string, req proto.Message) (BResp, error) {
	resp := newMessage[BResp]()
	wire, err := proto.Marshal(req)
	if err != nil {
		return resp, backends.Errorf(backends.ClassInternal, "csi-gateway: encoding the translated %s: %v", target, err)
	}
	raw, err := b.inner.Unary(ctx, target, wire)
	if err != nil {
		return resp, err
	}
	if err := proto.Unmarshal(raw, resp); err != nil {
		return resp, backends.Errorf(backends.ClassInternal, "backend %q: the answer to %s is not a valid %s: %v",
			b.name, target, resp.ProtoReflect().Descriptor().FullName(), err)
	}
	return resp, nil
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

// newMessage returns a new empty message of the generated type M (a pointer type).
func newMessage[M proto.Message]() M {
	var zero M
	return zero.ProtoReflect().Type().New().Interface().(M)
}

// same is the up (or down) of a method whose message converts with one function that cannot
// fail.
func same[From, To proto.Message, Req any](f func(From) To) func(From, Req) (To, error) {
	return func(m From, _ Req) (To, error) { return f(m), nil }
}
