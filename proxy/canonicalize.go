package proxy

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
)

// maxMessageBytes bounds the message of every status the gateway returns.
const maxMessageBytes = 1024

// canonicalize turns whatever error the rest of the chain returns into the status the CSI
// spec requires for the call's method (see errorRules): a code from the table, a non-empty
// message of at most 1 KiB with the request's secret values scrubbed out, and no details.
// When the table says OK (deleting what is already gone), the caller gets an empty response.
//
// Methods the gateway does not know are not CSI: their statuses pass through untouched.
func canonicalize(r *Redactor) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			err := next(ctx, call)
			if err == nil {
				return nil
			}
			if !call.Known() {
				if _, ok := status.FromError(err); ok {
					return err
				}
			}
			class := backends.ClassOf(err)
			if ctx.Err() != nil && class != backends.ClassDeadline {
				class = backends.ClassOf(ctx.Err()) // the caller left or ran out of time
			}
			code := canonicalCode(call.Method, class)
			if code == codes.OK {
				call.Response = []byte{} // the method's empty response message
				return nil
			}
			return status.Error(code, boundMessage(call.secrets(r).Scrub(messageOf(err, class))))
		}
	}
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

// boundMessage cuts msg to maxMessageBytes on a rune boundary.
func boundMessage(msg string) string {
	if len(msg) <= maxMessageBytes {
		return msg
	}
	const ellipsis = "…"
	cut := maxMessageBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + ellipsis
}
