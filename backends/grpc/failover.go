package grpcbackend

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
)

// WithLogger sets where the backend says that calls moved to another target (one warning per
// move, naming both targets and why). Lines carry no backend name: give a logger that has one
// (log.With("backend", name)). Default: no log.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// target is one address of the driver and its connections.
type target struct {
	index int        // in Backend.targets, and in an agent's connections
	addr  string     // as configured: unix:///abs/path.sock or dns:///host:port
	key   string     // its config key, for messages: backends.NAME.target or backends.NAME.targets[i]
	kind  targetKind // the transport addr names
	// calls is what calls, streams and readiness probes go over: the frame client
	// (WithFrames) or grpc-go's client, which is then conn too.
	calls grpc.ClientConnInterface
	conn  *grpc.ClientConn // nil with the frame client
}

// wakeWait bounds how long wake waits for a target's connection to be made again. A Unix
// socket or a TCP peer nearby connects in far less; a target still down costs the call that
// woke it (a call failing over, a readiness probe, the breaker's trial) this much.
const wakeWait = 250 * time.Millisecond

// failover runs try on the targets, starting with the one that worked last, until one reaches
// its driver; that target's result is the call's, and it becomes the target calls go to. try
// gets the client the call goes over there, agent a's (nil: the backend's own). try
// returns why (grpc's words) when its attempt never reached the driver (see unreached), and
// then the next target gets the call, each target at most once, while ctx lasts. When no
// target could be reached, the error is ClassUnavailable and names every target tried; with
// one target it is that target's error as classify made it.
func (b *Backend) failover(ctx context.Context, a *agent, try func(t *target, calls grpc.ClientConnInterface) (unreached string, err error)) error {
	start := int(b.preferred.Load())
	var (
		tried []string
		last  error
	)
	for i := range b.targets {
		idx := (start + i) % len(b.targets)
		t := b.targets[idx]
		calls, conn := a.over(t)
		if i > 0 {
			if ctx.Err() != nil {
				break
			}
			wake(ctx, conn)
		} else {
			a.catchUp(ctx, t)
		}
		why, err := try(t, calls)
		if err == nil || why == "" {
			b.prefer(start, idx, strings.Join(tried, "; "))
			return err
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", t.addr, why))
		last = err
	}
	if len(tried) < 2 {
		return last
	}
	return b.newError(backends.ClassUnavailable, last,
		"cannot reach the driver at any target: %s; is the driver running? check backends.%s.targets",
		strings.Join(tried, "; "), b.name)
}

// unreached returns grpc's message for a call that failed without reaching the driver — no
// connection, so the driver never saw the request and the call may go to another target —
// and "" for any other failure: the driver's own answer, a connection lost after the request
// went out (reached), the caller going away.
func unreached(ctx context.Context, err error, reached bool) string {
	st := status.Convert(err)
	if reached || st.Code() != codes.Unavailable || ctx.Err() != nil {
		return ""
	}
	if st.Message() == "" {
		return "no connection"
	}
	return st.Message()
}

// wake brings a target's connection to a state that reflects its driver now, before a call
// that cannot wait for a connection (calls fail at once on a failing one) goes there: it waits
// out a connection attempt under way (which may have begun before the driver came back), makes
// an idle connection connect, cuts a reconnect backoff short (up to 5 s for a socket, 2 min
// for TCP), and returns once conn is ready, or after wakeWait. A call failing over comes here
// because the target it went to first has just failed, and this one may have come back since
// its connection last tried; without this it would fail although the driver is up. A nil
// conn (the frame client, which dials on the call itself) needs nothing.
//
// It trusts no single reading of conn's state: grpc-go gives calls a connection's new picker
// before it publishes the new state (ClientConn's UpdateState), so for a moment, or longer on
// a loaded machine, a connection that calls already find failing can still say CONNECTING,
// and one they find ready can say TRANSIENT_FAILURE. Hence the loop until READY, rather than
// acting on, or skipping, the state read first: skipping a stale CONNECTING once failed a
// call with the error of a connection attempt made before its driver came back.
func wake(ctx context.Context, conn *grpc.ClientConn) {
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, wakeWait)
	defer cancel()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready, connectivity.Shutdown:
			return
		case connectivity.TransientFailure:
			conn.ResetConnectBackoff()
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, s) {
			return
		}
	}
}

// prefer makes the target at index to the one calls go to, when the one at from was, and logs
// the move with why.
func (b *Backend) prefer(from, to int, why string) {
	if from == to || !b.preferred.CompareAndSwap(int32(from), int32(to)) {
		return
	}
	b.log.Warn("grpc backend: calls now go to another target",
		"from", b.targets[from].addr, "to", b.targets[to].addr, "reason", why)
}

// notReady collects why Ready's targets are not ready.
type notReady struct {
	targets []*target
	errs    []*backends.Error
}

func (n *notReady) add(t *target, err *backends.Error) {
	n.targets = append(n.targets, t)
	n.errs = append(n.errs, err)
}

// reasons says why each target is not ready, without the `backend "NAME": ` prefix.
func (n *notReady) reasons(b *Backend) string {
	prefix := fmt.Sprintf("backend %q: ", b.name)
	out := make([]string, len(n.errs))
	for i, err := range n.errs {
		out[i] = n.targets[i].addr + ": " + strings.TrimPrefix(err.Message, prefix)
	}
	return strings.Join(out, "; ")
}

// err is Ready's error: with one target tried, its error; with more, one error of the first
// target's class that says why for each.
func (n *notReady) err(b *Backend) error {
	if len(n.errs) == 1 {
		return n.errs[0]
	}
	return b.newError(n.errs[0].Class, n.errs[0], "no target is ready: %s", n.reasons(b))
}
