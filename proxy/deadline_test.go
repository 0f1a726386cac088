package proxy

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
)

// deadlineSeen runs the deadline middleware of t on one call of method whose caller allowed
// callerTimeout (0: no deadline) and returns the deadline the next handler got, as a
// duration from the call's start, and the caller's deadline, if any.
func deadlineSeen(tb testing.TB, t *Timeouts, method string, callerTimeout time.Duration) (got time.Duration, has bool, caller time.Time) {
	tb.Helper()
	ctx := context.Background()
	if callerTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callerTimeout)
		defer cancel()
		caller, _ = ctx.Deadline()
	}
	start := time.Now()
	var dl time.Time
	h := limitDeadlines(t)(func(ctx context.Context, _ *Call) error {
		dl, has = ctx.Deadline()
		return nil
	})
	if err := h(ctx, &Call{Method: method, info: lookupMethod(method)}); err != nil {
		tb.Fatal(err)
	}
	if caller.IsZero() {
		return dl.Sub(start), has, caller
	}
	if dl.Equal(caller) {
		return callerTimeout, has, caller // the caller's own deadline, untouched
	}
	return dl.Sub(start), has, caller
}

func mustTimeouts(t *testing.T, c TimeoutConfig) *Timeouts {
	t.Helper()
	tt, err := NewTimeouts(c)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

func TestDeadlineMiddleware(t *testing.T) {
	const (
		create   = "/csi.v1.Controller/CreateVolume"
		list     = "/csi.v1.Controller/ListVolumes"
		stage    = "/csi.v1.Node/NodeStageVolume"
		info     = "/csi.v1.Node/NodeGetInfo"
		metadata = "/csi.v1.SnapshotMetadata/GetMetadataAllocated"
		unknown  = "/example.v1.Storage/Wipe"
	)
	overrides := mustTimeouts(t, TimeoutConfig{Overrides: []MethodTimeout{
		{Methods: []string{list}, Default: 5 * time.Second},
		{Methods: []string{"/csi.v1.Node/*"}, Default: 3 * time.Minute, Max: 4 * time.Minute},
		{Methods: []string{"/csi.v1.Node/*"}, Default: time.Second}, // shadowed by the entry above
	}})
	maxOnly := mustTimeouts(t, TimeoutConfig{Overrides: []MethodTimeout{
		{Methods: []string{"/csi.v1.Controller/Create*"}, Max: time.Minute},
	}})
	everything := mustTimeouts(t, TimeoutConfig{Default: 20 * time.Second, Max: time.Hour, Overrides: []MethodTimeout{
		{Methods: []string{"*"}, Default: 90 * time.Second},
	}})
	global := mustTimeouts(t, TimeoutConfig{Default: 45 * time.Second, Max: 5 * time.Minute})

	tests := []struct {
		name     string
		timeouts *Timeouts
		method   string
		caller   time.Duration // 0: no deadline
		want     time.Duration
	}{
		{"no deadline: built-in default for CreateVolume", nil, create, 0, 2 * time.Minute},
		{"no deadline: built-in default for NodeStageVolume", nil, stage, 0, 2 * time.Minute},
		{"no deadline: default for the rest", nil, list, 0, DefaultCallTimeout},
		{"no deadline: default for an unknown method", nil, unknown, 0, DefaultCallTimeout},
		{"no deadline: SnapshotMetadata streams", nil, metadata, 0, time.Hour},
		{"long deadline capped", nil, create, 24 * time.Hour, DefaultMaxTimeout},
		{"long deadline capped, unknown method", nil, unknown, 24 * time.Hour, DefaultMaxTimeout},
		{"SnapshotMetadata has a higher cap", nil, metadata, 3 * time.Hour, 3 * time.Hour},
		{"short deadline kept", nil, create, 5 * time.Second, 5 * time.Second},
		{"short deadline kept, shorter than the default", nil, list, time.Second, time.Second},
		{"deadline at the cap kept", nil, create, DefaultMaxTimeout - time.Second, DefaultMaxTimeout - time.Second},
		{"override by full method", overrides, list, 0, 5 * time.Second},
		{"override by glob beats the built-in default", overrides, stage, 0, 3 * time.Minute},
		{"override by glob, method with no built-in entry", overrides, info, 0, 3 * time.Minute},
		{"override cap by glob", overrides, stage, time.Hour, 4 * time.Minute},
		{"override cap: short deadline kept", overrides, stage, 10 * time.Second, 10 * time.Second},
		{"method without override keeps the built-in", overrides, create, 0, 2 * time.Minute},
		{"override max only: the built-in default is capped by it", maxOnly, create, 0, time.Minute},
		{"override max only: caller capped", maxOnly, create, time.Hour, time.Minute},
		{"star override wins over the built-in", everything, create, 0, 90 * time.Second},
		{"star override, global max", everything, create, 2 * time.Hour, time.Hour},
		{"global default and max", global, list, 0, 45 * time.Second},
		{"global max caps the built-in", global, create, time.Hour, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, has, _ := deadlineSeen(t, tt.timeouts, tt.method, tt.caller)
			if !has {
				t.Fatal("the call has no deadline")
			}
			if d := got - tt.want; d < -time.Second || d > time.Second {
				t.Errorf("deadline in %v, want %v", got.Round(time.Millisecond), tt.want)
			}
		})
	}
}

// TestDeadlineCallerWinsExactly: a caller's deadline within the limits reaches the next handler
// unchanged, to the nanosecond.
func TestDeadlineCallerWinsExactly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	var got time.Time
	h := limitDeadlines(nil)(func(ctx context.Context, _ *Call) error {
		got, _ = ctx.Deadline()
		return nil
	})
	m := "/csi.v1.Controller/CreateVolume"
	if err := h(ctx, &Call{Method: m, info: lookupMethod(m)}); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(want) {
		t.Errorf("deadline %v, want the caller's %v", got, want)
	}
}

// TestDeadlineMessage: a call the gateway's own deadline ended says which limit it was; one the
// caller's deadline ended does not.
func TestDeadlineMessage(t *testing.T) {
	to := mustTimeouts(t, TimeoutConfig{Overrides: []MethodTimeout{
		{Methods: []string{"/csi.v1.Controller/*"}, Default: 50 * time.Millisecond, Max: 100 * time.Millisecond},
	}})
	backend := func(ctx context.Context, _ *Call) error {
		<-ctx.Done()
		return status.Error(codes.DeadlineExceeded, `backend "b": no answer from the driver within the deadline`)
	}
	h := limitDeadlines(to)(backend)
	m := "/csi.v1.Controller/CreateVolume"

	tests := []struct {
		name   string
		caller time.Duration
		want   string
	}{
		{"default", 0, `csi-gateway: CreateVolume timed out after 50ms, the gateway's default for it (the caller set no deadline; see timeouts in the gateway's configuration): backend "b": no answer from the driver within the deadline`},
		{"cap", time.Hour, `csi-gateway: CreateVolume timed out after 100ms, the gateway's maximum for it (the caller allowed 1h0m0s; see timeouts in the gateway's configuration): backend "b": no answer from the driver within the deadline`},
		{"caller's own", 30 * time.Millisecond, `backend "b": no answer from the driver within the deadline`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.caller)
				defer cancel()
			}
			st := status.Convert(h(ctx, &Call{Method: m, info: lookupMethod(m)}))
			if st.Code() != codes.DeadlineExceeded || st.Message() != tt.want {
				t.Errorf("got %v %q\nwant DeadlineExceeded %q", st.Code(), st.Message(), tt.want)
			}
		})
	}
}

func TestNewTimeoutsErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  TimeoutConfig
		want string
	}{
		{"negative default", TimeoutConfig{Default: -time.Second}, "timeouts.default: -1s is negative"},
		{"negative max", TimeoutConfig{Max: -time.Second}, "timeouts.max: -1s is negative"},
		{"default over max", TimeoutConfig{Default: time.Hour}, "timeouts.default: 1h0m0s is longer than timeouts.max (10m0s)"},
		{"no methods", TimeoutConfig{Overrides: []MethodTimeout{{Default: time.Second}}},
			`timeouts.overrides[0].methods: empty; use ["*"] for every method`},
		{"bad pattern", TimeoutConfig{Overrides: []MethodTimeout{{Methods: []string{"*"}, Default: time.Second}, {Methods: []string{"/csi.v1.Node/[*"}, Max: time.Second}}},
			`timeouts.overrides[1].methods: bad pattern "/csi.v1.Node/[*": syntax error in pattern`},
		{"nothing set", TimeoutConfig{Overrides: []MethodTimeout{{Methods: []string{"*"}}}},
			"timeouts.overrides[0]: sets neither default nor max"},
		{"negative override", TimeoutConfig{Overrides: []MethodTimeout{{Methods: []string{"*"}, Max: -time.Minute}}},
			"timeouts.overrides[0].max: -1m0s is negative"},
		{"override default over its max", TimeoutConfig{Overrides: []MethodTimeout{{Methods: []string{"*"}, Default: time.Hour, Max: time.Minute}}},
			"timeouts.overrides[0].default: 1h0m0s is longer than its max (1m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTimeouts(tt.cfg)
			if err == nil || err.Error() != tt.want {
				t.Errorf("NewTimeouts = %v\nwant %q", err, tt.want)
			}
		})
	}
}

// TestDeadlineBuiltinPatterns: every pattern of the built-in table names methods that exist, so
// a typo cannot silently leave a slow method at the short default.
func TestDeadlineBuiltinPatterns(t *testing.T) {
	known := newMethodTable()
	for _, r := range builtinTimeouts {
		for _, p := range r.Methods {
			found := false
			for m := range known {
				if matchesAny([]string{p}, m) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("built-in timeout pattern %q matches no known method", p)
			}
		}
	}
}

// TestDeadlineThroughServer: a caller that sets no deadline gets the gateway's default, which
// reaches the backend, and the message says whose deadline it was. (ListVolumes: a method the
// serializer leaves alone, so that this test is about deadlines only.)
func TestDeadlineThroughServer(t *testing.T) { onEachTransport(t, testDeadlineThroughServer) }

func testDeadlineThroughServer(t *testing.T, tr Transport) {
	to := mustTimeouts(t, TimeoutConfig{Overrides: []MethodTimeout{
		{Methods: []string{"/csi.v1.Controller/ListVolumes"}, Default: 200 * time.Millisecond},
	}})
	left := make(chan time.Duration, 1) // what the backend had left of the deadline
	fake := &serverFake{answer: func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, backends.Errorf(backends.ClassInternal, "no deadline reached the backend")
		}
		left <- time.Until(dl)
		<-ctx.Done()
		return nil, backends.Errorf(backends.ClassDeadline, `backend "fake": no answer within the deadline`)
	}}
	opts := serverFakeOptions(fake)
	opts.Timeouts = to
	ts := startServerHarness(t, tr, opts, ListenerPolicy{}, slog.LevelInfo)

	start := time.Now()
	_, err := csi.NewControllerClient(ts.conn).ListVolumes(context.Background(), &csi.ListVolumesRequest{})
	took := time.Since(start)
	st := status.Convert(err)
	want := `csi-gateway: ListVolumes timed out after 200ms, the gateway's default for it (the caller set no deadline; see timeouts in the gateway's configuration): backend "fake": no answer within the deadline`
	if st.Code() != codes.DeadlineExceeded || st.Message() != want {
		t.Errorf("got %v %q\nwant DeadlineExceeded %q", st.Code(), st.Message(), want)
	}
	var backendLeft time.Duration
	select {
	case backendLeft = <-left:
	default: // the backend got no deadline; reported above
	}
	if took > 5*time.Second || backendLeft <= 0 || backendLeft > 200*time.Millisecond {
		t.Errorf("took %v; the backend had %v left", took, backendLeft)
	}
}
