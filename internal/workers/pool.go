// Package workers runs functions on goroutines that it keeps, for a while after each
// function returns, to run the next ones.
//
// A goroutine started afresh for every function starts on a small stack, and a function with
// a deep call chain (the gateway's middleware, a backend call, protobuf and OpenTelemetry
// under it) grows that stack by copying it, every time: on the gateway's serialized calls, run
// on a goroutine of their own each, that copying was 5% of the CPU per call. A kept goroutine
// keeps its grown stack.
package workers

import "time"

// Pool runs functions on kept goroutines. Its zero value is not usable: use New. It is safe
// for concurrent use and needs no closing: its goroutines end after they have been idle for
// the pool's idle time.
type Pool struct {
	idle time.Duration
	work chan func() // unbuffered: a send succeeds only when a worker is waiting for work
}

// New returns a pool whose goroutines end after idle without work.
func New(idle time.Duration) *Pool {
	return &Pool{idle: idle, work: make(chan func())}
}

// Go runs f on an idle goroutine of p, or on a new one when none is idle: it never waits for
// a goroutine to become free, so there are as many as there are functions running at once.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		go p.worker(f)
	}
}

// worker runs f, then every function it is given, until it has been idle for p.idle.
func (p *Pool) worker(f func()) {
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(p.idle)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		}
	}
}
