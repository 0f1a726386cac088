package grpcbackend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// classify turns the error of a call to the driver at t into a *backends.Error. reached says
// whether the call got a connection to the driver (false: it failed while connecting). ctx is
// the caller's context, used to tell the caller going away from the driver failing.
//
// The driver's status code picks the class (backends.ClassFromCode) and its message is kept,
// prefixed with the backend's name; status details are dropped. A transport failure (no
// connection, or the connection lost mid-call) becomes ClassUnavailable with a message naming
// the target and what to check.
func (b *Backend) classify(ctx context.Context, t *target, err error, reached bool, what string) *backends.Error {
	var be *backends.Error
	if errors.As(err, &be) {
		return be
	}
	st, answered := status.FromError(err)
	if !answered {
		st = status.FromContextError(err)
	}
	code, msg := st.Code(), st.Message()
	switch {
	case code == codes.Canceled && ctx.Err() == nil && b.closed.Load():
		// grpc cancels calls in flight when the connection is closed under them.
		return b.closedError(err)
	case code == codes.Unavailable && (!reached || transportFailure(msg)):
		return b.newError(backends.ClassUnavailable, err,
			"%scannot reach the driver at %s (%s); is the driver running? check %s",
			what, t.addr, msg, t.key)
	case code == codes.DeadlineExceeded && deadlinePassed(ctx):
		// grpc's message here depends on which side noticed first ("context deadline
		// exceeded", "stream terminated by RST_STREAM ..."); it says nothing more.
		return b.newError(backends.ClassDeadline, err, "%sno answer from the driver within the deadline", what)
	case code == codes.Canceled && ctx.Err() != nil:
		return b.newError(backends.ClassCanceled, err, "%sthe caller canceled the call", what)
	}
	if msg == "" {
		msg = fmt.Sprintf("the driver returned %s without a message", code)
	}
	answer := b.newError(backends.ClassFromCode(code), err, "%s%s", what, msg)
	if answered {
		answer.Answer = st // the driver's own answer, details and all
	}
	return answer
}

// deadlinePassed reports whether ctx's deadline has passed. It does not wait for ctx.Err: the
// driver, which got the same deadline, may end the call a moment before ctx's own timer fires.
func deadlinePassed(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// transportFailure reports whether an UNAVAILABLE message is grpc's own word for a lost
// connection rather than the driver's answer. grpc-go has no typed error for this; these are
// the messages of its HTTP/2 client transport.
func transportFailure(msg string) bool {
	for _, p := range []string{"connection error", "error reading from server", "transport is closing",
		"connection closed", "the connection is draining", "transport: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// newError returns a *backends.Error whose message starts with the backend's name and is bounded
// to backends.MaxMessageBytes.
func (b *Backend) newError(class backends.Class, cause error, format string, args ...any) *backends.Error {
	msg := fmt.Sprintf("backend %q: ", b.name) + fmt.Sprintf(format, args...)
	return &backends.Error{Class: class, Message: backends.Truncate(msg, backends.MaxMessageBytes), Cause: cause}
}

// closedError is the error of a call made on (or cut short by) a closed Backend.
func (b *Backend) closedError(cause error) *backends.Error {
	return b.newError(backends.ClassUnavailable, cause, "the backend is closed (the gateway is shutting down or reloading)")
}
