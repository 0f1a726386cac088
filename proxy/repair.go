package proxy

import (
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/csispec"
	"github.com/csi-gateway/csi-gateway/redact"
)

// Repair is what the gateway may change in the failures a backend answers with (the
// configuration's backends.NAME.repair; docs/tap.md has the table).
type Repair string

const (
	// RepairPlugin: the gateway is the plugin (the default of rest, csp and embedded
	// backends). Every failure takes the code of the spec's table (csispec.ErrorCode), a
	// message naming the backend cut to 1 KiB, and no details.
	RepairPlugin Repair = "plugin"
	// RepairSpec: in front of a real driver (the default of grpc backends). A driver's status
	// passes unchanged unless the spec forbids it: a code the spec rules out for the RPC
	// (csispec.RequiredCode: DeleteVolume NOT_FOUND MUST be OK) or a code outside the
	// canonical 0-16 (INTERNAL), an empty message, status details. Failures the gateway meets itself (the driver unreachable, a deadline) are
	// reported as under plugin, minus the table's rules the spec does not require.
	RepairSpec Repair = "spec"
	// RepairNone: a pure tap. A driver's status passes exactly, details included; only the
	// request's secret values are scrubbed out of its message (and a detail that holds one is
	// dropped).
	RepairNone Repair = "none"
)

// ParseRepair reads a repair setting as written in the configuration; "" is the setting of
// a backend of type backendType (DefaultRepair).
func ParseRepair(s, backendType string) (Repair, error) {
	switch r := Repair(s); r {
	case "":
		return DefaultRepair(backendType), nil
	case RepairPlugin, RepairSpec, RepairNone:
		return r, nil
	}
	return "", fmt.Errorf("unknown repair setting %q; use plugin, spec or none", s)
}

// UnmarshalText reads a repair setting as the configuration decodes it (ParseRepair); ""
// stays unset, for the backend's type to decide (DefaultRepair).
func (r *Repair) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*r = ""
		return nil
	}
	v, err := ParseRepair(string(text), "")
	if err == nil {
		*r = v
	}
	return err
}

// DefaultRepair is the repair setting of a backend of type backendType: spec in front of a
// gRPC driver, plugin where the gateway is the plugin (rest, embedded).
func DefaultRepair(backendType string) Repair {
	if backendType == "grpc" {
		return RepairSpec
	}
	return RepairPlugin
}

// The kinds of change the gateway records (a call's repair, csigw_repairs_total's kind).
const (
	repairCode       = "code"        // another code than the backend's
	repairMessage    = "message"     // an empty message filled in
	repairMessageCut = "message-cut" // a message cut to its bound
	repairDetails    = "details"     // status details dropped
	repairSecret     = "secret"      // a secret value of the request scrubbed out of the message
	repairAnswer     = "answer"      // an answer that breaks a response rule refused (validate)
)

// repair is what the gateway changed in the backend's answer to a call: the backend's own
// code and message (scrubbed of the request's secrets, bounded) and the kinds of change.
// The log, the call record, the span and the metrics show it beside the answered status.
type repair struct {
	code    codes.Code
	message string
	kinds   []string
}

// logAttrs are the attributes of the call's log line that show the backend's own answer
// (backend_code, backend_message) and the kinds of repair; none when nothing was changed.
func (r *repair) logAttrs() []slog.Attr {
	if r == nil {
		return nil
	}
	return []slog.Attr{slog.String("backend_code", r.code.String()), slog.String("backend_message", r.message),
		slog.String("repairs", strings.Join(r.kinds, ","))}
}

// noteRepair records on call that the gateway answered otherwise than the backend did, when
// kinds is not empty.
func (c *Call) noteRepair(code codes.Code, message string, kinds []string) {
	if len(kinds) == 0 {
		return
	}
	c.repaired = &repair{code: code, message: boundMessage(message), kinds: kinds}
}

// answerOf is the status the caller gets for the driver's own answer st under setting
// (spec or none), with what was changed; code OK means the empty response.
func answerOf(method, backend string, setting Repair, st *status.Status, scrub *redact.Scrubber) (*status.Status, []string) {
	var kinds []string
	code, msg := st.Code(), scrub.Scrub(st.Message())
	if msg != st.Message() {
		kinds = append(kinds, repairSecret)
	}
	details := st.Proto().GetDetails()
	if setting == RepairSpec {
		if required, ok := csispec.RequiredCode(method, backends.ClassFromCode(code)); ok && required != code {
			code, kinds = required, append(kinds, repairCode)
		}
		if code > codes.Unauthenticated { // not one of the canonical codes the spec names
			code, kinds = codes.Internal, append(kinds, repairCode)
		}
		if code == codes.OK {
			return status.New(codes.OK, ""), kinds
		}
		if msg == "" {
			msg, kinds = fmt.Sprintf("backend %q: the driver returned %s without a message", backend, code), append(kinds, repairMessage)
		}
		if len(details) > 0 {
			details, kinds = nil, append(kinds, repairDetails)
		}
	} else if kept := detailsWithoutSecrets(details, scrub); len(kept) != len(details) {
		details, kinds = kept, append(kinds, repairDetails)
	}
	if len(msg) > backends.MaxMessageBytes {
		msg, kinds = backends.Truncate(msg, backends.MaxMessageBytes), append(kinds, repairMessageCut)
	}
	p := st.Proto()
	p.Code, p.Message, p.Details = int32(code), msg, details
	return status.FromProto(p), kinds
}

// detailsWithoutSecrets returns the details none of whose bytes hold a secret value of the
// request: a detail the scrubber would change is dropped, since its bytes cannot be scrubbed
// and stay a valid message.
func detailsWithoutSecrets(details []*anypb.Any, scrub *redact.Scrubber) []*anypb.Any {
	kept := details[:0:0]
	for _, d := range details {
		if raw := string(d.GetValue()); scrub.Scrub(raw) == raw && scrub.Scrub(d.GetTypeUrl()) == d.GetTypeUrl() {
			kept = append(kept, d)
		}
	}
	return kept
}

// pluginChanges are the kinds of change canonicalize made under plugin to a backend's failure
// of code theirs, message theirMsg (scrubbed), with or without details, when the caller gets
// answered and the message full (before its cut to 1 KiB). The prefix naming the backend is
// the gateway's documented form there, not a change.
func pluginChanges(theirs codes.Code, theirMsg string, hadDetails bool, answered codes.Code, full string) []string {
	var kinds []string
	if theirs != answered {
		kinds = append(kinds, repairCode)
	}
	if answered == codes.OK {
		return kinds
	}
	if theirMsg == "" {
		kinds = append(kinds, repairMessage)
	}
	if len(full) > maxMessageBytes {
		kinds = append(kinds, repairMessageCut)
	}
	if hadDetails {
		kinds = append(kinds, repairDetails)
	}
	return kinds
}
