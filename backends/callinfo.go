package backends

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/codes"
)

// CallInfo is what a backend and the gateway share about one call: the backend reports its
// attempts back, for logs, traces and metrics, and the gateway lends it the scrubber of the
// call's secrets. The gateway puts one in the context of each call; backends update it.
type CallInfo struct {
	attempts atomic.Int32
	scrubber Scrubber // set before the backend is called; nil: scrub nothing
	answered atomic.Pointer[Answered]
}

// Answered is a failure the backend's driver answered that the backend itself turned into
// the call's success (backends/translate: a v0 driver's NOT_FOUND that is v1's OK): the
// driver's own code and message, which the gateway records beside the answer it gives, as it
// records its own repairs.
type Answered struct {
	Code    codes.Code
	Message string
}

// NoteAnswered records that the call succeeds although the driver answered code with
// message (not yet scrubbed: the gateway scrubs it).
func (c *CallInfo) NoteAnswered(code codes.Code, message string) {
	if c != nil {
		c.answered.Store(&Answered{Code: code, Message: message})
	}
}

// AnsweredOtherwise returns what NoteAnswered recorded, or nil.
func (c *CallInfo) AnsweredOtherwise() *Answered {
	if c == nil {
		return nil
	}
	return c.answered.Load()
}

// Scrubber removes the secret values of a call's request from text (redact.Scrubber, built
// from the request on first use). It must be safe to call from the goroutine that runs the
// backend call.
type Scrubber interface {
	Scrub(text string) string
}

// SetScrubber makes Scrub use s. The gateway calls it before handing the call to a backend.
func (c *CallInfo) SetScrubber(s Scrubber) {
	if c != nil {
		c.scrubber = s
	}
}

// Scrub returns text without the secret values of the call's request. A backend calls it on
// words it did not write (an appliance's error body) before it parses, cleans or cuts them:
// once text is transformed, a secret may no longer be recognised. The gateway scrubs every
// error message again, in every form a secret takes, so this is a first line, not the only
// one. Without a scrubber (or on a nil CallInfo) text is returned as it is.
func (c *CallInfo) Scrub(text string) string {
	if c == nil || c.scrubber == nil {
		return text
	}
	return c.scrubber.Scrub(text)
}

// AddAttempt records one more attempt (request sent to the backend) for the call.
func (c *CallInfo) AddAttempt() {
	if c != nil {
		c.attempts.Add(1)
	}
}

// Attempts returns how many attempts the backend made.
func (c *CallInfo) Attempts() int {
	if c == nil {
		return 0
	}
	return int(c.attempts.Load())
}

type callInfoKey struct{}

// WithCallInfo returns a context carrying a fresh CallInfo, and that CallInfo.
func WithCallInfo(ctx context.Context) (context.Context, *CallInfo) {
	ci := &CallInfo{}
	return context.WithValue(ctx, callInfoKey{}, ci), ci
}

// CallInfoFrom returns the call's CallInfo, or nil (whose methods are no-ops).
func CallInfoFrom(ctx context.Context) *CallInfo {
	ci, _ := ctx.Value(callInfoKey{}).(*CallInfo)
	return ci
}
