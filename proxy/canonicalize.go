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

// canonicalize turns whatever error the rest of the chain returns into the status the CSI
// spec requires for the call's method (csispec.ErrorCode): a code from the table, a non-empty
// message of at most 1 KiB with the request's secret values scrubbed out, and no details.
// When the table says OK (deleting what is already gone), the caller gets an empty response.
//
// Methods the gateway does not know are not CSI: their statuses pass through untouched.
func canonicalize(r *redact.Redactor) Middleware {
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
			class := backends.ClassOf(err)
			if ctx.Err() != nil && class != backends.ClassDeadline {
				class = callerGone(ctx)
			}
			code := csispec.ErrorCode(call.Method, class)
			if code == codes.OK {
				call.Response = []byte{} // the method's empty response message
				return nil
			}
			return status.Error(code, boundMessage(call.secrets(r).Scrub(messageOf(err, class))))
		}
	}
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
