package backends

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a circuit breaker (BreakerConfig's zero values).
const (
	DefaultBreakerFailures    = 5
	DefaultBreakerCoolDown    = time.Second
	DefaultBreakerMaxCoolDown = 30 * time.Second
)

// BreakerConfig is the circuit breaker of one backend (backends.NAME.circuitBreaker in the
// gateway's configuration; the field comments name the keys). Zero values take the defaults
// above.
type BreakerConfig struct {
	// Failures (failures) is how many transient failures in a row open the circuit.
	Failures int
	// CoolDown (coolDown) is how long an open circuit fails calls fast before it lets one
	// trial call through. Each failed trial doubles it, up to MaxCoolDown (maxCoolDown,
	// default 30s or CoolDown if that is longer); a successful one resets it.
	CoolDown, MaxCoolDown time.Duration
	// Disable (disable) turns the breaker off: every call goes to the backend. The other
	// fields are then ignored.
	Disable bool
}

// WithDefaults fills the zero fields of c and checks the result. Each error names its key
// relative to the circuitBreaker block ("failures: ..."), for the caller to prefix.
func (c BreakerConfig) WithDefaults() (BreakerConfig, error) {
	if c.Disable {
		return c, nil
	}
	var errs []error
	if c.Failures < 0 {
		errs = append(errs, fmt.Errorf("failures: %d is negative; use the number of failures in a row that opens the circuit, such as 5", c.Failures))
	}
	if c.CoolDown < 0 {
		errs = append(errs, fmt.Errorf("coolDown: %v is negative", c.CoolDown))
	}
	if c.MaxCoolDown < 0 {
		errs = append(errs, fmt.Errorf("maxCoolDown: %v is negative", c.MaxCoolDown))
	}
	if c.Failures == 0 {
		c.Failures = DefaultBreakerFailures
	}
	if c.CoolDown == 0 {
		c.CoolDown = DefaultBreakerCoolDown
	}
	switch {
	case c.MaxCoolDown == 0:
		c.MaxCoolDown = max(DefaultBreakerMaxCoolDown, c.CoolDown)
	case c.MaxCoolDown > 0 && c.CoolDown > 0 && c.MaxCoolDown < c.CoolDown:
		errs = append(errs, fmt.Errorf("maxCoolDown: %v is shorter than coolDown (%v)", c.MaxCoolDown, c.CoolDown))
	}
	return c, errors.Join(errs...)
}

// BreakerState is the state of a circuit breaker.
type BreakerState int

// The states of a circuit breaker.
const (
	// BreakerClosed: calls go to the backend.
	BreakerClosed BreakerState = iota
	// BreakerOpen: calls fail fast until the cool-down has passed.
	BreakerOpen
	// BreakerHalfOpen: the cool-down has passed; one trial call may go to the backend, and
	// its outcome closes or reopens the circuit.
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("BreakerState(%d)", int(s))
}

// Breaker is the circuit breaker of one backend target. After Failures transient failures
// in a row (ClassUnavailable or ClassDeadline) it opens: calls fail fast with a
// ClassUnavailable *Error, without reaching the target, for the cool-down. Then it lets one
// trial call through (half-open; other calls still fail fast): success closes the circuit,
// failure reopens it for twice the cool-down, up to the maximum. Any other outcome, such as
// not-found or invalid, is a success: the target answered.
//
// A call asks with Admit and reports its outcome on the Permit it gets. Outcomes of calls
// admitted before the circuit last changed state are ignored, so a slow call that started
// before an outage cannot close a circuit that has opened since.
//
// A Breaker is safe for concurrent use and runs no goroutine; the cool-down is checked
// when a call asks. A nil *Breaker admits every call and reports itself closed.
type Breaker struct {
	backend string // its name, as in messages
	target  string // what is broken, as in messages; "" for the whole backend
	cfg     BreakerConfig

	mu          sync.Mutex
	now         func() time.Time
	state       BreakerState // BreakerOpen even after the cool-down; see current
	gen         uint64       // counts state changes; a Permit carries the gen it was given in
	consecutive int          // transient failures in a row
	coolDown    time.Duration
	until       time.Time // while open: when a trial call may go through
	probing     bool      // while half-open: the trial call is under way

	rejected atomic.Uint64
}

// NewBreaker returns a closed breaker for target (printed in its messages, such as a URL;
// "" when the breaker guards the whole backend) of the backend called backend. Zero and
// negative fields of cfg take the defaults. With cfg.Disable it returns nil, which admits
// every call.
func NewBreaker(backend, target string, cfg BreakerConfig) *Breaker {
	if cfg.Disable {
		return nil
	}
	if cfg.Failures <= 0 {
		cfg.Failures = DefaultBreakerFailures
	}
	if cfg.CoolDown <= 0 {
		cfg.CoolDown = DefaultBreakerCoolDown
	}
	if cfg.MaxCoolDown < cfg.CoolDown {
		cfg.MaxCoolDown = max(DefaultBreakerMaxCoolDown, cfg.CoolDown)
	}
	return &Breaker{backend: backend, target: target, cfg: cfg, now: time.Now, coolDown: cfg.CoolDown}
}

// SetClock makes b read the time from now instead of time.Now; for tests. It is safe to call
// at any time.
func (b *Breaker) SetClock(now func() time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = now
}

// Admit asks whether a call may go to the target now. If it may, Admit returns a Permit on
// which the caller must report the call's outcome exactly once. If not, it returns a
// ClassUnavailable *Error saying that the circuit is open and when the next trial call
// will be let through; the call must then not be sent.
func (b *Breaker) Admit() (Permit, error) {
	if b == nil {
		return Permit{}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current() == BreakerOpen || (b.state == BreakerOpen && b.probing) {
		b.rejected.Add(1)
		st := b.status()
		return Permit{}, &Error{Class: ClassUnavailable, Message: fmt.Sprintf("backend %q: %s", b.backend, st)}
	}
	if b.state == BreakerOpen { // the cool-down has passed: this call is the trial
		b.probing = true
		return Permit{b: b, gen: b.gen, trial: true}, nil
	}
	return Permit{b: b, gen: b.gen}, nil
}

// State returns the breaker's state now: closed, open, or half-open once the cool-down has
// passed (whether or not the trial call has been sent).
func (b *Breaker) State() BreakerState {
	if b == nil {
		return BreakerClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.current()
}

// Status returns the breaker's state with the details messages, metrics and readiness
// checks show.
func (b *Breaker) Status() BreakerStatus {
	if b == nil {
		return BreakerStatus{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status()
}

// Target is what the breaker guards, as its messages name it: a URL's scheme://host, or ""
// for a whole backend.
func (b *Breaker) Target() string {
	if b == nil {
		return ""
	}
	return b.target
}

// Rejected returns how many calls the breaker has failed fast since it was made, for metrics.
func (b *Breaker) Rejected() uint64 {
	if b == nil {
		return 0
	}
	return b.rejected.Load()
}

// current is the state now. b.mu must be held.
func (b *Breaker) current() BreakerState {
	if b.state == BreakerOpen && !b.now().Before(b.until) {
		return BreakerHalfOpen
	}
	return b.state
}

// status is Status with b.mu held.
func (b *Breaker) status() BreakerStatus {
	st := BreakerStatus{Backend: b.backend, Target: b.target, State: b.current(), Failures: b.consecutive, Trial: b.probing}
	if st.State == BreakerOpen {
		st.RetryIn = b.until.Sub(b.now())
	}
	return st
}

// report records the outcome of a call admitted in generation gen.
func (b *Breaker) report(gen uint64, trial bool, o outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gen != b.gen {
		return // admitted before the last change of state: says nothing about this one
	}
	switch {
	case o == neutral:
		if trial {
			b.probing = false // let the next call be the trial
		}
	case o == success:
		b.consecutive = 0
		if trial {
			b.state, b.probing, b.coolDown = BreakerClosed, false, b.cfg.CoolDown
			b.gen++
		}
	case trial: // failure of the trial: open again, for longer
		b.consecutive++
		b.coolDown = min(2*b.coolDown, b.cfg.MaxCoolDown)
		b.open()
	default:
		b.consecutive++
		if b.state == BreakerClosed && b.consecutive >= b.cfg.Failures {
			b.coolDown = b.cfg.CoolDown
			b.open()
		}
	}
}

// open opens the circuit for the current cool-down. b.mu must be held.
func (b *Breaker) open() {
	b.state, b.probing, b.until = BreakerOpen, false, b.now().Add(b.coolDown)
	b.gen++
}

// BreakerStatus describes a breaker at one moment.
type BreakerStatus struct {
	Backend string // the backend's name
	Target  string // the target the breaker guards, "" for the whole backend
	State   BreakerState
	// Failures is the number of transient failures in a row: since the circuit last closed,
	// when it is open.
	Failures int
	// RetryIn is how long the circuit stays open before a trial call is let through.
	RetryIn time.Duration
	// Trial says that the trial call of a half-open circuit is under way.
	Trial bool
}

// String describes s for a person, without the backend's name: "circuit open for TARGET
// after 5 consecutive failures; retrying in 5s".
func (s BreakerStatus) String() string {
	var what string
	switch {
	case s.State == BreakerClosed:
		return "circuit closed"
	case s.Target == "":
		what = fmt.Sprintf("circuit open after %d consecutive failures", s.Failures)
	default:
		what = fmt.Sprintf("circuit open for %s after %d consecutive failures", s.Target, s.Failures)
	}
	switch {
	case s.State == BreakerOpen:
		return what + "; retrying in " + roundUp(s.RetryIn).String()
	case s.Trial:
		return what + "; a trial call is under way, and calls resume if it succeeds"
	}
	return what + "; the next call is a trial"
}

// roundUp rounds d up to a whole second, or below one second to a whole millisecond, so
// that "retrying in" never promises less than it is.
func roundUp(d time.Duration) time.Duration {
	unit := time.Millisecond
	if d >= time.Second {
		unit = time.Second
	}
	return max((d + unit - 1).Truncate(unit), unit)
}

// outcome is what a call told a breaker about its target.
type outcome int

const (
	neutral outcome = iota // nothing: the caller went away, or the call failed before the target
	success                // the target answered
	failure                // a transient failure: the target could not be reached or was too slow
)

// Permit is a breaker's leave for one call to go to its target. Report the call's outcome
// with exactly one of Done, Succeeded, Failed or Release. The zero Permit (from a nil
// Breaker) reports to nothing.
type Permit struct {
	b     *Breaker
	gen   uint64
	trial bool
}

// Done reports the call's outcome from its error: nil is a success, ClassUnavailable and
// ClassDeadline a failure, ClassCanceled neither (the caller went away), any other class a
// success (the target answered).
func (p Permit) Done(err error) {
	switch {
	case err == nil:
		p.report(success)
	case ClassOf(err) == ClassCanceled:
		p.report(neutral)
	case ClassOf(err).Transient():
		p.report(failure)
	default:
		p.report(success)
	}
}

// Trial reports whether the call is the trial of a half-open circuit: the first call let
// through after the cool-down. A backend may prepare for it, such as by reconnecting at once.
func (p Permit) Trial() bool { return p.trial }

// Succeeded reports that the target answered.
func (p Permit) Succeeded() { p.report(success) }

// Failed reports a transient failure of the target.
func (p Permit) Failed() { p.report(failure) }

// Release reports that the call says nothing about the target (it was not sent, or the
// caller went away); a trial call's release lets the next call be the trial.
func (p Permit) Release() { p.report(neutral) }

func (p Permit) report(o outcome) {
	if p.b != nil {
		p.b.report(p.gen, p.trial, o)
	}
}

// BreakerReporter is implemented by backends that guard their targets with circuit
// breakers, for metrics and readiness: Breakers returns them, one per target, in a fixed
// order (none when disabled).
type BreakerReporter interface {
	Breakers() []*Breaker
}

// BudgetReporter is implemented by backends that retry within a retry budget, for metrics:
// RetryBudget returns it (nil when disabled).
type BudgetReporter interface {
	RetryBudget() *RetryBudget
}
