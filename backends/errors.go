package backends

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Class is what kind of failure a backend reported, independent of its wire protocol. The
// gateway turns a class into the gRPC code the failing RPC's section of the CSI spec requires
// (see proxy's canonical error table); backends never choose the final code themselves.
type Class int

// The closed set of classes.
const (
	ClassInternal        Class = iota // the backend failed in a way nobody can fix by retrying
	ClassNotFound                     // the object (volume, snapshot, node, group) does not exist
	ClassAlreadyExists                // an object of that name exists and is incompatible
	ClassInvalid                      // the request is wrong and must be changed
	ClassPrecondition                 // the object is not in a state that allows the call
	ClassOutOfRange                   // a size or range the backend cannot serve
	ClassExhausted                    // out of capacity or quota, or rate-limited
	ClassAborted                      // a conflicting operation is in flight, or a stale token
	ClassUnavailable                  // the backend cannot be reached or is overloaded: retry
	ClassDeadline                     // the backend did not answer in time: retry
	ClassCanceled                     // the caller went away
	ClassUnauthenticated              // the call's credentials were not accepted
	ClassPermission                   // the caller may not do this
	ClassUnimplemented                // the backend does not implement the call
)

var classNames = [...]string{"internal", "not-found", "already-exists", "invalid", "precondition", "out-of-range",
	"exhausted", "aborted", "unavailable", "deadline", "canceled", "unauthenticated", "permission", "unimplemented"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// Transient reports whether a failure of this class may succeed when retried unchanged.
func (c Class) Transient() bool {
	return c == ClassUnavailable || c == ClassDeadline
}

// Error is a classified backend failure.
type Error struct {
	Class Class
	// Message says what went wrong for a person; it must not hold secrets.
	Message string
	// Cause is the underlying error, for errors.Is/As; it is never shown to callers.
	Cause error
	// Answer is the status the backend itself answered with, exactly as it sent it (code,
	// message, details), when the failure is its answer; nil when the backend did not answer
	// (unreachable, timed out, closed) or speaks no gRPC. The gateway passes it on, repaired
	// as the backend's repair setting says, and never shows it unscrubbed.
	Answer *status.Status
}

func (e *Error) Error() string { return e.Message }

// MaxMessageBytes bounds the Message of every Error a backend returns, against a runaway
// driver or appliance. It is well above the 1 KiB a caller finally sees: the gateway cuts
// messages only after scrubbing the request's secrets out of them, and a secret cut in half
// here would no longer be recognised there.
const MaxMessageBytes = 16 << 10

// Truncate cuts s to at most n bytes on a rune boundary, ending it with "…" (counted in the
// n) when anything was cut. It is the one rule for bounding a message, here and in the
// gateway (which cuts to 1 KiB after scrubbing).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns an *Error of class c.
func Errorf(c Class, format string, args ...any) *Error {
	return &Error{Class: c, Message: fmt.Sprintf(format, args...)}
}

// ClassOf returns the class of err: the Class of an *Error in its chain, the class matching
// a gRPC status code, or ClassCanceled/ClassDeadline for context errors; ClassInternal for
// anything else.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	switch {
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ClassDeadline
	}
	if st, ok := status.FromError(err); ok {
		return ClassFromCode(st.Code())
	}
	return ClassInternal
}

// codeOfClass is the plain translation used where no RPC-specific rule applies.
var codeOfClass = map[Class]codes.Code{
	ClassInternal: codes.Internal, ClassNotFound: codes.NotFound, ClassAlreadyExists: codes.AlreadyExists,
	ClassInvalid: codes.InvalidArgument, ClassPrecondition: codes.FailedPrecondition, ClassOutOfRange: codes.OutOfRange,
	ClassExhausted: codes.ResourceExhausted, ClassAborted: codes.Aborted, ClassUnavailable: codes.Unavailable,
	ClassDeadline: codes.DeadlineExceeded, ClassCanceled: codes.Canceled, ClassUnauthenticated: codes.Unauthenticated,
	ClassPermission: codes.PermissionDenied, ClassUnimplemented: codes.Unimplemented,
}

// Code is the gRPC code a class maps to when no RPC-specific rule says otherwise.
func (c Class) Code() codes.Code {
	if code, ok := codeOfClass[c]; ok {
		return code
	}
	return codes.Internal
}

// ClassFromCode classifies a gRPC status code received from a backend. Unknown and DataLoss
// count as internal; OK is not an error and maps to ClassInternal if ever asked.
func ClassFromCode(code codes.Code) Class {
	for class, c := range codeOfClass {
		if c == code {
			return class
		}
	}
	return ClassInternal
}
