package csispec

import (
	"slices"

	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/backends"
)

// errorRule is one line of the canonical error table: when a backend fails one of these
// methods with this class, the caller gets this code. docs/errors.md is generated from it
// (see TestErrorsDocMatchesTable).
type errorRule struct {
	methods []string
	class   backends.Class
	code    codes.Code
	// required is true when the spec forbids the backend's answer (a MUST): the rule then
	// repairs a driver's own status too (RequiredCode, the repair setting spec). Otherwise the
	// answer is one the spec allows, and the rule is only the gateway's choice where it is the
	// plugin (repair: plugin).
	required bool
	why      string
}

// errorRules are the RPC-specific rules of the CSI spec and the VolumeGroup proposal. Any
// (method, class) not listed takes the class's plain code (backends.Class.Code): in
// particular unavailable and deadline stay UNAVAILABLE and DEADLINE_EXCEEDED, never INTERNAL,
// because the Kubernetes sidecars treat INTERNAL as final.
var errorRules = []errorRule{
	{
		methods: []string{"/csi.v1.Controller/DeleteVolume", "/csi.v1.Controller/DeleteSnapshot",
			"/csi.v1.GroupController/DeleteVolumeGroupSnapshot", "/volumegroup.Controller/DeleteVolumeGroup"},
		class: backends.ClassNotFound, code: codes.OK, required: true,
		why: "deleting an object that does not exist MUST succeed (idempotency)",
	},
	{
		methods: []string{"/csi.v1.Node/NodeUnstageVolume", "/csi.v1.Node/NodeUnpublishVolume"},
		class:   backends.ClassNotFound, code: codes.OK,
		why: "a volume the node no longer knows is neither staged nor published there",
	},
	{
		methods: []string{"/csi.v1.Controller/ControllerUnpublishVolume"},
		class:   backends.ClassNotFound, code: codes.OK,
		why: "a volume or node the backend no longer knows can safely be regarded as unpublished (v1 SHOULD); NOT_FOUND would make Kubernetes retry the detach forever",
	},
	{
		methods: probeMethods,
		class:   backends.ClassUnavailable, code: codes.FailedPrecondition,
		why: "a backend that is down, unreachable, behind an open circuit or draining is a plugin that is not healthy (spec §Probe, v0's as v1's); the message keeps the backend's reason. An answer with ready=false is not a failure and passes through",
	},
	{
		methods: probeMethods,
		class:   backends.ClassDeadline, code: codes.FailedPrecondition,
		why: "a backend that does not answer Probe in time is not healthy either (spec §Probe, v0's as v1's)",
	},
}

// probeMethods are Probe in both versions: v0's §Probe words its failure as v1's does, so
// one pair of rows serves both.
var probeMethods = []string{"/csi.v1.Identity/Probe", "/csi.v0.Identity/Probe"}

// ErrorCode is the code the caller gets when a backend fails method (a full method name)
// with class and the gateway is the plugin (repair: plugin): the table's rule for that RPC
// when it has one, else the class's plain code.
func ErrorCode(method string, class backends.Class) codes.Code {
	if r, ok := ruleFor(method, class); ok {
		return r.code
	}
	return class.Code()
}

// RequiredCode is the code the spec requires instead of a failure of class for method, when
// the spec forbids that failure (DeleteVolume NOT_FOUND MUST be OK); ok is false when the
// spec allows the backend's answer as it is.
func RequiredCode(method string, class backends.Class) (code codes.Code, ok bool) {
	if r, found := ruleFor(method, class); found && r.required {
		return r.code, true
	}
	return codes.OK, false
}

// ruleFor is the table's rule for a failure of class for method, if any.
func ruleFor(method string, class backends.Class) (errorRule, bool) {
	for _, r := range errorRules {
		if r.class == class && slices.Contains(r.methods, method) {
			return r, true
		}
	}
	return errorRule{}, false
}
