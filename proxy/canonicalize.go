package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/csispec"
	"github.com/csi-gateway/csi-gateway/redact"
)

// maxMessageBytes bounds the message of every status the gateway returns.
const maxMessageBytes = 1024

// canonicalize turns whatever error the rest of the chain returns into the status the caller
// gets, as the repair setting of the call's backend says (repairs; a backend not listed, and
// a call no backend saw, take plugin):
//
//   - plugin: the status the CSI spec requires for the call's method (csispec.ErrorCode): a
//     code from the table, a non-empty message of at most 1 KiB, and no details. When the
//     table says OK (deleting what is already gone), the caller gets an empty response.
//   - spec and none: the backend's own answer (backends.Error.Answer) as answerOf passes it;
//     a failure the gateway met itself (the backend unreachable, a deadline) as under plugin,
//     with only the rules the spec requires (spec) or none of them (none).
//
// In every setting the request's secret values are scrubbed out of the message, and what the
// gateway changed is recorded on the call (noteRepair) beside the backend's own code and
// (scrubbed) message. Methods the gateway does not know are not CSI: their statuses pass
// through untouched; those of a DescriptorSet keep their code, scrubbed and without details.
func canonicalize(r *redact.Redactor, repairs map[string]Repair) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			err := next(ctx, call)
			if err == nil {
				return nil
			}
			if !call.Known() {
				if st, ok := backendStatus(err); ok {
					return st.Err()
				}
			}
			if call.Known() && call.info.notCSI { // a DescriptorSet's: its code stands, scrubbed, without details
				if st, ok := backendStatus(err); ok {
					scrubbed := call.secrets(r).Scrub(st.Message())
					var kinds []string
					if scrubbed != st.Message() {
						kinds = append(kinds, repairSecret)
					}
					if len(st.Proto().GetDetails()) > 0 {
						kinds = append(kinds, repairDetails) // cannot be scrubbed: they are dropped
					}
					call.noteRepair(st.Code(), scrubbed, kinds)
					return status.Error(st.Code(), scrubbed)
				}
			}
			setting := repairs[call.Backend]
			if setting == "" {
				setting = RepairPlugin
			}
			scrub := call.secrets(r)
			var be *backends.Error
			if errors.As(err, &be) && be.Answer != nil && setting != RepairPlugin {
				st, kinds := answerOf(call.Method, call.Backend, setting, be.Answer, scrub)
				call.noteRepair(be.Answer.Code(), scrub.Scrub(be.Answer.Message()), kinds)
				if st.Code() == codes.OK {
					call.Response = []byte{} // the method's empty response message
					return nil
				}
				return st.Err()
			}
			class := backends.ClassOf(err)
			if ctx.Err() != nil && class != backends.ClassDeadline {
				class = callerGone(ctx)
			}
			code := codeFor(setting, call.Method, class)
			raw := messageOf(err, class)
			full := scrub.Scrub(raw)
			theirs, theirMsg, hadDetails := class.Code(), full, false
			if be != nil && be.Answer != nil {
				theirs, theirMsg, hadDetails = be.Answer.Code(), scrub.Scrub(be.Answer.Message()), len(be.Answer.Proto().GetDetails()) > 0
			}
			kinds := pluginChanges(theirs, theirMsg, hadDetails, code, full)
			if full != raw {
				kinds = append(kinds, repairSecret)
			}
			call.noteRepair(theirs, theirMsg, kinds)
			if code == codes.OK {
				call.Response = []byte{} // the method's empty response message
				return nil
			}
			return status.Error(code, boundMessage(full))
		}
	}
}

// codeFor is the code of a failure of class for method that is not the backend's own answer
// (or any failure, under plugin), under the repair setting.
func codeFor(setting Repair, method string, class backends.Class) codes.Code {
	switch setting {
	case RepairPlugin:
		return csispec.ErrorCode(method, class)
	case RepairSpec:
		if code, ok := csispec.RequiredCode(method, class); ok {
			return code
		}
	}
	return class.Code()
}

// deadlineSlack is how close to its deadline a cancelled call counts as timed out: a caller
// whose deadline passes resets the stream, and that reset often arrives before the gateway's
// own timer fires, so the context says "canceled" for what was a deadline.
const deadlineSlack = 50 * time.Millisecond

// callerGone classifies a call whose context ended: deadline when its deadline has (nearly)
// passed, canceled otherwise.
func callerGone(ctx context.Context) backends.Class {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < deadlineSlack {
		return backends.ClassDeadline
	}
	return backends.ClassOf(ctx.Err())
}

// backendStatus returns the status a backend answered with, untouched (the backend's own
// code and message, before any backend prefixed its name): a status error itself, or the
// Cause of a *backends.Error.
func backendStatus(err error) (*status.Status, bool) {
	var be *backends.Error
	if errors.As(err, &be) {
		if be.Cause == nil {
			return nil, false
		}
		err = be.Cause
	}
	return status.FromError(err)
}

// messageOf extracts the person-readable part of an error.
func messageOf(err error, class backends.Class) string {
	var be *backends.Error
	msg := ""
	switch {
	case errors.As(err, &be):
		msg = be.Message
	default:
		if st, ok := status.FromError(err); ok {
			msg = st.Message()
		} else {
			msg = err.Error()
		}
	}
	if msg == "" {
		msg = fmt.Sprintf("the backend failed (%s) without saying why", class)
	}
	return msg
}

// boundMessage cuts msg to maxMessageBytes on a rune boundary (backends.Truncate).
func boundMessage(msg string) string { return backends.Truncate(msg, maxMessageBytes) }
