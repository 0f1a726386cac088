package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"classified", Errorf(ClassNotFound, "gone"), ClassNotFound},
		{"wrapped classified", fmt.Errorf("ctx: %w", Errorf(ClassAborted, "busy")), ClassAborted},
		{"status", status.Error(codes.AlreadyExists, "x"), ClassAlreadyExists},
		{"unknown status", status.Error(codes.Unknown, "x"), ClassInternal},
		{"data loss", status.Error(codes.DataLoss, "x"), ClassInternal},
		{"canceled", context.Canceled, ClassCanceled},
		{"deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), ClassDeadline},
		{"plain", errors.New("boom"), ClassInternal},
	} {
		if got := ClassOf(tc.err); got != tc.want {
			t.Errorf("%s: ClassOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClassCodesRoundTrip checks every class has its own code and comes back from it.
func TestClassCodesRoundTrip(t *testing.T) {
	seen := map[codes.Code]Class{}
	for c := ClassInternal; c <= ClassUnimplemented; c++ {
		code := c.Code()
		if prev, dup := seen[code]; dup {
			t.Errorf("%v and %v both map to %v", prev, c, code)
		}
		seen[code] = c
		if back := ClassFromCode(code); back != c {
			t.Errorf("%v → %v → %v", c, code, back)
		}
		if strings.HasPrefix(c.String(), "class(") {
			t.Errorf("class %d has no name: %q", int(c), c.String())
		}
	}
	if !ClassUnavailable.Transient() || !ClassDeadline.Transient() || ClassInternal.Transient() {
		t.Error("only unavailable and deadline are transient")
	}
}

func TestErrorUnwraps(t *testing.T) {
	cause := errors.New("socket gone")
	e := &Error{Class: ClassUnavailable, Message: "backend x: down", Cause: cause}
	if !errors.Is(e, cause) || e.Error() != "backend x: down" {
		t.Errorf("Error %q does not unwrap to its cause", e.Error())
	}
}

func TestCallInfo(t *testing.T) {
	var none *CallInfo
	none.AddAttempt() // a nil CallInfo is a no-op
	if CallInfoFrom(context.Background()).Attempts() != 0 {
		t.Error("no CallInfo in the context must count zero")
	}
	ctx, ci := WithCallInfo(context.Background())
	CallInfoFrom(ctx).AddAttempt()
	CallInfoFrom(ctx).AddAttempt()
	if ci.Attempts() != 2 {
		t.Errorf("attempts = %d, want 2", ci.Attempts())
	}
}
