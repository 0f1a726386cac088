package proxy

import (
	"log/slog"
	"testing"
	"time"
)

// TestRateLimitedLog: a burst gives one line; the next line, once the interval is over,
// counts the events not logged in between.
func TestRateLimitedLog(t *testing.T) {
	log := &serverLog{}
	r := newRateLimitedLog(slog.New(slog.NewJSONHandler(log, nil)), "listener", "/run/x.sock")
	for range 5 {
		r.warn("refused", "caller", "uid=1")
	}
	lines := log.lines(t, "refused")
	if len(lines) != 1 || lines[0]["listener"] != "/run/x.sock" || lines[0]["caller"] != "uid=1" || lines[0]["not_logged"] != nil {
		t.Fatalf("after a burst of 5: %v, want one line", lines)
	}
	r.mu.Lock()
	r.next = time.Now().Add(-time.Millisecond) // the interval is over
	r.mu.Unlock()
	r.warn("refused", "caller", "uid=2")
	lines = log.lines(t, "refused")
	if len(lines) != 2 || lines[1]["caller"] != "uid=2" || lines[1]["not_logged"] != float64(4) {
		t.Errorf("after the interval: %v, want a second line counting the 4 not logged", lines)
	}
}
