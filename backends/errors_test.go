package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

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

// TestTruncate: a message that fits is left alone; a longer one is cut to the bound on a rune
// boundary, marked with "…", whatever the width of the rune at the cut.
func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short", "abc", 8, "abc"},
		{"exact", "abcdefgh", 8, "abcdefgh"},
		{"ascii", "abcdefghi", 8, "abcde…"},
		{"two-byte rune at the cut", "abcdéfghi", 8, "abcd…"},
		{"three-byte rune at the cut", "ab日本語xyz", 9, "ab日…"},
		{"bound below the mark", "abcdef", 2, "…"},
		{"at MaxMessageBytes", strings.Repeat("日本", MaxMessageBytes), MaxMessageBytes, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.n)
			if tc.want != "" && got != tc.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
			if !utf8.ValidString(got) || (len(got) > tc.n && len(tc.in) > tc.n && got != "…") {
				t.Errorf("Truncate gave %d bytes (bound %d), valid UTF-8 %v", len(got), tc.n, utf8.ValidString(got))
			}
			if len(tc.in) > tc.n && !strings.HasSuffix(got, "…") {
				t.Error("a cut message is not marked")
			}
		})
	}
}
