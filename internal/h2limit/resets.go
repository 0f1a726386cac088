package h2limit

import "time"

// ResetBudget is a token bucket for the RST_STREAM frames one connection's client sends: it
// holds up to PerSecond resets and regains PerSecond a second, so a client may cancel a burst
// of that many calls at once and that many a second for ever, and one that resets faster (the
// rapid-reset attack, which opens streams and resets them at once to make the server start
// work it never finishes) runs it dry. It is not safe for concurrent use: a connection's
// reader owns it.
type ResetBudget struct {
	perSecond float64
	tokens    float64
	last      time.Time
}

// NewResetBudget returns a full budget of perSecond resets (at least 1).
func NewResetBudget(perSecond int) ResetBudget {
	p := float64(max(perSecond, 1))
	return ResetBudget{perSecond: p, tokens: p}
}

// Spend takes one reset at now and reports whether the budget had it.
func (b *ResetBudget) Spend(now time.Time) bool {
	if !b.last.IsZero() {
		b.tokens = min(b.perSecond, b.tokens+now.Sub(b.last).Seconds()*b.perSecond)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
