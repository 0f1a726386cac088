package proxy

import (
	"log/slog"
	"sync"
	"time"
)

// rateLimitedLogInterval is the shortest interval between two lines of one rateLimitedLog.
const rateLimitedLogInterval = time.Second

// rateLimitedLog writes warnings about events a peer can cause at will (refused connections)
// at most once per rateLimitedLogInterval, so that a peer retrying in a loop cannot fill the
// log; each line counts the events not logged since the previous one ("not_logged"). It is
// safe for concurrent use.
type rateLimitedLog struct {
	log  *slog.Logger
	args []any // on every line

	mu        sync.Mutex
	next      time.Time
	notLogged int
}

func newRateLimitedLog(log *slog.Logger, args ...any) *rateLimitedLog {
	return &rateLimitedLog{log: log, args: args}
}

// warn logs msg with args (after the log's own) unless a line went out less than
// rateLimitedLogInterval ago.
func (r *rateLimitedLog) warn(msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Before(r.next) {
		r.notLogged++
		r.mu.Unlock()
		return
	}
	r.next = now.Add(rateLimitedLogInterval)
	n := r.notLogged
	r.notLogged = 0
	r.mu.Unlock()
	all := append(append(make([]any, 0, len(r.args)+len(args)+2), r.args...), args...)
	if n > 0 {
		all = append(all, "not_logged", n)
	}
	r.log.Warn(msg, all...)
}
