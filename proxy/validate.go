package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/csispec"
	"github.com/csi-gateway/csi-gateway/internal/choice"
)

// ValidationMode says what the gateway does with a call that breaks a rule of the CSI spec
// (docs/validation.md lists the rules): refuse it, log it, or not look.
type ValidationMode string

const (
	// ValidationEnforce refuses a request that breaks a rule (INVALID_ARGUMENT, or
	// UNIMPLEMENTED / FAILED_PRECONDITION for capability rules) without calling the backend,
	// and turns a backend's malformed answer into an error naming the backend and the rule.
	// It is the default of the configuration (validation: enforce).
	ValidationEnforce ValidationMode = "enforce"
	// ValidationWarn logs at warn level what enforce would refuse, then forwards as is.
	ValidationWarn ValidationMode = "warn"
	// ValidationOff forwards every call unchecked; it is what the zero Options mean.
	ValidationOff ValidationMode = "off"
)

// ParseValidationMode reads a mode as written in the configuration; "" means enforce.
func ParseValidationMode(s string) (ValidationMode, error) {
	return choice.Parse(s, "validation mode", ValidationEnforce, ValidationEnforce, ValidationWarn, ValidationOff)
}

// UnmarshalText parses the validation key (see ParseValidationMode), so that the
// configuration holds a ValidationMode, read once.
func (m *ValidationMode) UnmarshalText(text []byte) error {
	return choice.Set(m, text, ParseValidationMode)
}

// validate checks every call of a known CSI or VolumeGroup method against the spec's rules
// (package csispec): the request (required fields, sizes, formats), what the backend the
// method routes to advertises (capability gating), and the backend's answer. This middleware
// only decodes the call, supplies the capabilities and acts on what csispec finds. In enforce mode a broken request
// never reaches the backend and a malformed answer never reaches the caller; in warn mode both
// are logged and forwarded; off (or "") adds nothing to the chain.
//
// It sits after confine (and the deadline limit), outside serialization and canonicalize: a refused request
// takes no slot of a volume and reaches no backend, its errors are statuses of the gateway's
// own (no details, a bounded message, no value from the request), and the answer it checks is
// the one the caller would get (DeleteVolume of a missing volume already made OK). Capabilities are fetched from the routed backend and cached (capabilityCache);
// when they cannot be fetched, calls are not gated (fail open) and the failure is logged.
func validate(mode ValidationMode, routes routeTable, bes map[string]backends.Backend, repairs map[string]Repair, log *slog.Logger) Middleware {
	if mode != ValidationEnforce && mode != ValidationWarn {
		return func(next Handler) Handler { return next }
	}
	v := &validator{mode: mode, routes: routes, caps: newCapabilityCache(bes, log, defaultCapabilityRefresh), repairs: repairs, log: log}
	return v.middleware
}

// validator is the state of the validate middleware; safe for concurrent use.
type validator struct {
	mode   ValidationMode
	routes routeTable
	caps   *capabilityCache
	// repairs are the backends' repair settings: a backend with none has its answers checked
	// as in warn mode (logged, passed on).
	repairs map[string]Repair
	log     *slog.Logger
}

func (v *validator) middleware(next Handler) Handler {
	return func(ctx context.Context, call *Call) error {
		if !call.Known() || call.info.notCSI || call.info.desc.IsStreamingClient() {
			return next(ctx, call) // not CSI, or client-streaming: nothing decoded to check
		}
		backend := v.routes.match(call.Method)
		req, err := call.DecodedRequest()
		if err != nil {
			if err := v.refuse(ctx, call, backend, "request", []csispec.Violation{{Code: codes.InvalidArgument, Msg: err.Error()}}); err != nil {
				return err
			}
			return next(ctx, call) // warn: forwarded; an answer to an undecodable request is not checked
		}
		if vs := v.checkRequest(ctx, call.Method, backend, req); len(vs) > 0 {
			if err := v.refuse(ctx, call, backend, "request", vs); err != nil {
				return err
			}
		}
		if err := next(ctx, call); err != nil || call.Stream != nil {
			return err // statuses are canonicalize's; streamed answers are not checked
		}
		resp, err := decodeResponse(call) // a nil Response is the empty message
		if err != nil {
			return v.refuseAnswer(ctx, call, backend, []csispec.Violation{{Code: csispec.ResponseCode(call.Method),
				Msg: fmt.Sprintf("the answer is not a valid %s: %v", call.info.desc.Output().FullName(), err)}})
		}
		if backend != "" {
			v.caps.learn(backend, call.Method, resp)
		}
		if vs := v.checkResponse(ctx, call.Method, backend, req, resp); len(vs) > 0 {
			return v.refuseAnswer(ctx, call, backend, vs)
		}
		return nil
	}
}

// decodeResponse decodes the raw answer of a unary call (a nil Response is the empty
// message), through the call so that the debug log reuses it.
func decodeResponse(call *Call) (proto.Message, error) {
	if call.Response == nil {
		return call.info.output.New().Interface(), nil
	}
	return call.DecodedResponse()
}

// checkRequest returns the rules req breaks (csispec.CheckRequest), with the capabilities of
// backend as the cache knows them.
func (v *validator) checkRequest(ctx context.Context, method, backend string, req proto.Message) []csispec.Violation {
	return csispec.CheckRequest(ctx, method, req, backend, v.caps)
}

// checkResponse returns the rules the backend's answer breaks, with the code each becomes
// (csispec.CheckResponse).
func (v *validator) checkResponse(ctx context.Context, method, backend string, req, resp proto.Message) []csispec.Violation {
	return csispec.CheckResponse(ctx, method, req, resp, backend, v.caps)
}

// refuseAnswer acts on the rules a backend's answer breaks, as refuse does; the answer of a
// backend whose repair setting is none passes, logged, and a refused answer is a repair of
// the call (the backend said OK).
func (v *validator) refuseAnswer(ctx context.Context, call *Call, backend string, vs []csispec.Violation) error {
	mode := v.mode
	if v.repairs[backend] == RepairNone {
		mode = ValidationWarn
	}
	err := v.refuseAs(ctx, mode, call, backend, "response", vs)
	if err != nil {
		call.noteRepair(codes.OK, "", []string{repairAnswer})
	}
	return err
}

// refuse acts on broken rules: in enforce mode it returns the status the caller gets; in warn
// mode it logs what enforce would have refused and returns nil.
func (v *validator) refuse(ctx context.Context, call *Call, backend, side string, vs []csispec.Violation) error {
	return v.refuseAs(ctx, v.mode, call, backend, side, vs)
}

// refuseAs is refuse in mode.
func (v *validator) refuseAs(ctx context.Context, mode ValidationMode, call *Call, backend, side string, vs []csispec.Violation) error {
	msg := describe(call, backend, side, vs)
	if mode == ValidationWarn {
		v.log.LogAttrs(ctx, slog.LevelWarn, "validation",
			slog.String("method", call.MethodName()),
			slog.String("backend", backend),
			slog.String("side", side),
			slog.String("would_refuse_with", vs[0].Code.String()),
			slog.String("problem", msg))
		return nil
	}
	return status.Error(vs[0].Code, msg)
}

// describe is the message of a refusal: where it comes from and the first broken rules.
func describe(call *Call, backend, side string, vs []csispec.Violation) string {
	var b strings.Builder
	switch {
	case side == "request" && vs[0].Code == codes.InvalidArgument:
		fmt.Fprintf(&b, "csi-gateway: invalid %s request: ", call.MethodName())
	case side == "request":
		b.WriteString("csi-gateway: ")
	case vs[0].Code == csispec.Incompatible:
		fmt.Fprintf(&b, "backend %q: the %s answer does not match the request: ", backend, call.MethodName())
	default:
		fmt.Fprintf(&b, "backend %q: malformed %s answer: ", backend, call.MethodName())
	}
	shown := min(len(vs), 3)
	for i, vl := range vs[:shown] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(vl.Msg)
	}
	if n := len(vs) - shown; n > 0 {
		fmt.Fprintf(&b, "; and %d more", n)
	}
	if side == "response" {
		switch vs[0].Code {
		case codes.Unavailable:
			b.WriteString("; the gateway does not pass on a malformed answer: retry with the same name, and fix the backend")
		case csispec.Incompatible:
			b.WriteString("; an object of this name exists and is not the one asked for: use another name, or the arguments it was created with")
		default:
			b.WriteString("; the gateway does not pass on a malformed answer: fix the backend")
		}
	}
	return boundMessage(b.String())
}
