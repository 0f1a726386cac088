package backends

import (
	"context"
	"sync/atomic"
)

// CallInfo is what a backend reports about one call back to the gateway, for logs, traces and
// metrics. The gateway puts one in the context of each call; backends update it.
type CallInfo struct {
	attempts atomic.Int32
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
