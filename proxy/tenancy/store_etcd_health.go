package tenancy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// etcdHealth is what a store knows of etcd's quorum from its own requests. A request that
// etcd did not answer within its request timeout (or answered that it has no leader) marks
// etcd down (a member that cannot be reached does not: the client goes to another); from then on one request at a time goes to etcd, as a probe, and every other
// fails at once, naming etcd, rather than each step of each call spending a request timeout
// of its own on an etcd without quorum. The first request that etcd answers clears it.
type etcdHealth struct {
	mu      sync.Mutex
	down    error // what showed etcd down; nil: etcd answers
	since   time.Time
	probing bool // a request is in flight as the probe
}

// admit lets a request go to etcd: at once while etcd answers (probe false); while it is
// down, as the probe if none is in flight, and otherwise not at all (the error says why).
func (h *etcdHealth) admit() (probe bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.down == nil:
		return false, nil
	case !h.probing:
		h.probing = true
		return true, nil
	}
	return false, fmt.Errorf("failed at once: it has not answered since %s (%w), and another request is checking whether it is back",
		h.since.UTC().Format(time.RFC3339), h.down)
}

// done is told how an admitted request ended. telling is false when the end says nothing
// of etcd's quorum: the caller's own end, a request given less than a request timeout that
// ran out of it, a member that could not be reached.
func (h *etcdHealth) done(probe bool, err error, telling bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if probe {
		h.probing = false
	}
	switch {
	case !telling || memberUnreachable(err):
	case err == nil || !quorumLost(err):
		h.down = nil // etcd answered (an error of its own says it is there too)
	case h.down == nil:
		h.down, h.since = err, time.Now()
	}
}

// quorumLost reports whether a request's error says etcd may have no quorum: it did not
// answer in time, or has no leader.
func quorumLost(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded ||
		errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrTimeout) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) || errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost)
}

// memberUnreachable reports whether a request failed on its way to a member (a member
// stopped or restarting): that says nothing of the quorum.
func memberUnreachable(err error) bool {
	return !errors.Is(err, rpctypes.ErrNoLeader) && status.Code(err) == codes.Unavailable
}

// request makes one request to etcd (do, with its bounded context) through the store's
// health: at once while etcd answers, failing at once while it is known down (unless it is
// the probe). Its context ends at the request timeout, or at what is left of ctx's deadline
// less the margin, whichever comes first. Its error names etcd.
func (s *etcdStore) request(ctx context.Context, do func(ctx context.Context) error) error {
	probe, err := s.health.admit()
	if err != nil {
		return fmt.Errorf("etcd at %s: %w", s.where, err)
	}
	timeout := s.timeout
	if d, ok := beforeDeadline(ctx); ok {
		timeout = min(timeout, d)
	}
	rctx, cancel := context.WithTimeout(ctx, max(timeout, 0))
	defer cancel()
	err = do(rctx)
	telling := ctx.Err() == nil && (err == nil || !quorumLost(err) || timeout == s.timeout)
	s.health.done(probe, err, telling)
	if err != nil {
		return s.fail(err)
	}
	return nil
}
