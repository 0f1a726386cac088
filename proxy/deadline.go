package proxy

import (
	"context"
	"fmt"
	"path"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Built-in deadline limits (see builtinTimeouts for the per-method ones).
const (
	// DefaultCallTimeout is the deadline of a call whose caller set none, for methods the
	// built-in table does not list (reads, capabilities, Probe, methods the gateway does not
	// know).
	DefaultCallTimeout = 30 * time.Second
	// DefaultMaxTimeout caps every call's deadline, the caller's too.
	DefaultMaxTimeout = 10 * time.Minute
)

// builtinTimeouts are the per-method limits that apply unless configured otherwise. Calls that
// make or remove things on storage, or mount, take minutes on real arrays and nodes: they get
// 2 minutes, which is also what kubelet gives NodeStage/NodePublish. SnapshotMetadata streams
// are read at the pace of a backup and may run for hours.
var builtinTimeouts = []MethodTimeout{
	{Methods: []string{
		"/csi.v1.Controller/Create*", "/csi.v1.Controller/Delete*",
		"/csi.v1.Controller/ControllerPublishVolume", "/csi.v1.Controller/ControllerUnpublishVolume",
		"/csi.v1.Controller/ControllerExpandVolume", "/csi.v1.Controller/ControllerModifyVolume",
		"/csi.v1.Node/NodeStageVolume", "/csi.v1.Node/NodeUnstageVolume",
		"/csi.v1.Node/NodePublishVolume", "/csi.v1.Node/NodeUnpublishVolume", "/csi.v1.Node/NodeExpandVolume",
		"/csi.v1.GroupController/Create*", "/csi.v1.GroupController/Delete*",
		"/volumegroup.Controller/Create*", "/volumegroup.Controller/Delete*",
		"/volumegroup.Controller/ModifyVolumeGroupMembership",
	}, Default: 2 * time.Minute},
	{Methods: []string{"/csi.v1.SnapshotMetadata/*"}, Default: time.Hour, Max: 6 * time.Hour},
}

// TimeoutConfig is the gateway's deadline policy (timeouts: in its configuration file). Zero
// values take the built-in defaults.
type TimeoutConfig struct {
	// Default (default) is the deadline a call gets when its caller set none and neither an
	// override nor the built-in table gives its method one. Zero: DefaultCallTimeout.
	Default time.Duration `mapstructure:"default"`
	// Max (max) caps the deadline of every call, the caller's own included, unless an
	// override or the built-in table gives its method another cap. Zero: DefaultMaxTimeout.
	Max time.Duration `mapstructure:"max"`
	// Overrides (overrides) set limits per method. They are checked in order before the
	// built-in table; for each of default and max, the first entry that matches the method
	// and sets it wins.
	Overrides []MethodTimeout `mapstructure:"overrides"`
}

// MethodTimeout sets the deadline limits of the methods that match one of its patterns: full
// method names or path.Match globs ("/csi.v1.Node/*", "/csi.v1.Controller/CreateVolume"), or
// "*" for every method. A zero Default or Max leaves that limit to the next matching entry.
type MethodTimeout struct {
	Methods []string      `mapstructure:"methods"`
	Default time.Duration `mapstructure:"default"`
	Max     time.Duration `mapstructure:"max"`
}

// Timeouts is a checked deadline policy, for Options.Timeouts. It is immutable and safe for
// concurrent use.
type Timeouts struct {
	def, max time.Duration
	rules    []MethodTimeout // the overrides, then the built-in table
	known    map[string]limits
}

// limits are one method's deadline limits.
type limits struct {
	def, max time.Duration // def <= max
}

// NewTimeouts checks c and returns its policy. Errors name the key at fault
// ("timeouts.overrides[1].methods: bad pattern ...").
func NewTimeouts(c TimeoutConfig) (*Timeouts, error) {
	t := &Timeouts{def: c.Default, max: c.Max}
	if t.def == 0 {
		t.def = DefaultCallTimeout
	}
	if t.max == 0 {
		t.max = DefaultMaxTimeout
	}
	switch {
	case t.def < 0:
		return nil, fmt.Errorf("timeouts.default: %v is negative", c.Default)
	case t.max < 0:
		return nil, fmt.Errorf("timeouts.max: %v is negative", c.Max)
	case t.def > t.max:
		return nil, fmt.Errorf("timeouts.default: %v is longer than timeouts.max (%v)", t.def, t.max)
	}
	for i, o := range c.Overrides {
		key := fmt.Sprintf("timeouts.overrides[%d]", i)
		if err := checkPatterns(key, o.Methods); err != nil {
			return nil, err
		}
		switch {
		case o.Default < 0:
			return nil, fmt.Errorf("%s.default: %v is negative", key, o.Default)
		case o.Max < 0:
			return nil, fmt.Errorf("%s.max: %v is negative", key, o.Max)
		case o.Default == 0 && o.Max == 0:
			return nil, fmt.Errorf("%s: sets neither default nor max", key)
		case o.Max > 0 && o.Default > o.Max:
			return nil, fmt.Errorf("%s.default: %v is longer than its max (%v)", key, o.Default, o.Max)
		}
	}
	t.rules = append(append([]MethodTimeout(nil), c.Overrides...), builtinTimeouts...)
	t.known = map[string]limits{}
	for method := range newMethodTable() {
		t.known[method] = t.resolve(method)
	}
	return t, nil
}

// checkPatterns checks the method patterns of the entry at key.
func checkPatterns(key string, patterns []string) error {
	if len(patterns) == 0 {
		return fmt.Errorf("%s.methods: empty; use [\"*\"] for every method", key)
	}
	for _, p := range patterns {
		if _, err := path.Match(p, "/x/y"); err != nil {
			return fmt.Errorf("%s.methods: bad pattern %q: %v", key, p, err)
		}
	}
	return nil
}

// builtin is the policy of a zero TimeoutConfig, used when Options.Timeouts is nil.
var builtin = sync.OnceValue(func() *Timeouts {
	t, err := NewTimeouts(TimeoutConfig{})
	if err != nil {
		panic("proxy: the built-in timeouts are invalid: " + err.Error())
	}
	return t
})

// limits returns the limits of a full method name. A nil *Timeouts is the built-in policy.
func (t *Timeouts) limits(method string) limits {
	if t == nil {
		t = builtin()
	}
	if l, ok := t.known[method]; ok {
		return l
	}
	return t.resolve(method)
}

// resolve works out the limits of method from the rules.
func (t *Timeouts) resolve(method string) limits {
	var l limits
	for _, r := range t.rules {
		if (l.def > 0 && l.max > 0) || !matchesAny(r.Methods, method) {
			continue
		}
		if l.def == 0 {
			l.def = r.Default
		}
		if l.max == 0 {
			l.max = r.Max
		}
	}
	if l.def == 0 {
		l.def = t.def
	}
	if l.max == 0 {
		l.max = t.max
	}
	l.def = min(l.def, l.max)
	return l
}

// matchesAny reports whether method matches one of patterns ("*" matches every method).
func matchesAny(patterns []string, method string) bool {
	for _, p := range patterns {
		if p == "*" {
			return true
		}
		if ok, _ := path.Match(p, method); ok {
			return true
		}
	}
	return false
}

// limitDeadlines gives every call a deadline within its method's limits (see Timeouts; nil
// is the built-in policy): a call whose caller set none gets the method's default, and a
// caller's deadline further away than the method's maximum is brought in to it. A caller's
// deadline within the maximum is left alone, so the caller's own deadline always wins when it
// is the shorter. The deadline reaches the backend with the call (grpc-timeout,
// Connect-Timeout-Ms).
//
// When the gateway's own deadline ends a known method with DEADLINE_EXCEEDED, the message
// says so and which limit it was, so that a timeout the caller did not ask for can be told
// from the backend being slow. It sits inside confine, before dispatch.
func limitDeadlines(t *Timeouts) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			l := t.limits(call.Method)
			now := time.Now()
			callerDeadline, has := ctx.Deadline()
			var deadline time.Time
			switch {
			case !has:
				deadline = now.Add(l.def)
			case callerDeadline.Sub(now) > l.max:
				deadline = now.Add(l.max)
			default:
				return next(ctx, call)
			}
			limited, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			err := next(limited, call)
			if err == nil || !call.Known() || ctx.Err() != nil || time.Until(deadline) > deadlineSlack {
				return err
			}
			if st, ok := status.FromError(err); ok && st.Code() == codes.DeadlineExceeded {
				return status.Error(codes.DeadlineExceeded, boundMessage(gatewayDeadline(call, l, has, callerDeadline.Sub(now))+": "+st.Message()))
			}
			return err
		}
	}
}

// gatewayDeadline says which of the gateway's limits l ended call: the method's default
// when the caller set no deadline (!callerSet), else its maximum, the caller having allowed
// callerAllowed.
func gatewayDeadline(call *Call, l limits, callerSet bool, callerAllowed time.Duration) string {
	if !callerSet {
		return fmt.Sprintf("csi-gateway: %s timed out after %v, the gateway's default for it (the caller set no deadline; see timeouts in the gateway's configuration)",
			call.MethodName(), l.def)
	}
	return fmt.Sprintf("csi-gateway: %s timed out after %v, the gateway's maximum for it (the caller allowed %v; see timeouts in the gateway's configuration)",
		call.MethodName(), l.max, callerAllowed.Round(time.Second))
}
