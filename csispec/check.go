package csispec

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Violation is one broken rule: the code the caller gets and what is wrong, naming the field
// path ("volume_capabilities[0].access_mode is required"). Messages never quote a value the
// caller sent (it could be a secret), only field paths, sizes and topology keys.
type Violation struct {
	Code codes.Code
	Msg  string
}

// MaxViolations bounds how many broken rules one check collects.
const MaxViolations = 8

// CheckRequest returns the rules req, a request of method (a full method name such as
// "/csi.v1.Controller/CreateVolume"), breaks when it is routed to the backend named backend
// that advertises caps: first the capability the method needs (UNIMPLEMENTED), then the
// request's own fields (INVALID_ARGUMENT), then the rules that depend on what the backend
// advertises. A method the rules do not know is checked for its messages' fields only.
func CheckRequest(ctx context.Context, method string, req proto.Message, backend string, caps Capabilities) []Violation {
	bc := backendCaps{ctx: ctx, backend: backend, caps: caps}
	if vl := gateMethod(method, bc); vl != nil {
		return []Violation{*vl}
	}
	c := newChecker(requestSide)
	c.check(req.ProtoReflect())
	if len(c.out) > 0 {
		return c.out
	}
	return gateRequest(method, req, bc)
}

// CheckResponse returns the rules resp, the backend's answer to req, breaks, each with the
// code the caller gets (ResponseCode's, or Incompatible for an answer that names an object
// other than the one asked for).
func CheckResponse(ctx context.Context, method string, req, resp proto.Message, backend string, caps Capabilities) []Violation {
	c := newChecker(responseSide)
	c.check(resp.ProtoReflect())
	checkAnswer(c, method, req, resp, backendCaps{ctx: ctx, backend: backend, caps: caps})
	return c.out
}

// backendCaps is the backend a call is routed to, as the rules see it: its name, for
// messages, and what it advertises.
type backendCaps struct {
	ctx     context.Context
	backend string
	caps    Capabilities
}

// has reports whether the backend advertises cap of kind, and whether that is known.
func (b backendCaps) has(kind CapKind, cap int32) (has, known bool) {
	if b.caps == nil {
		return false, false
	}
	return b.caps.Has(b.ctx, b.backend, kind, cap)
}

// lacks reports whether the backend is known not to advertise cap of kind.
func (b backendCaps) lacks(kind CapKind, cap int32) bool {
	has, known := b.has(kind, cap)
	return known && !has
}
