package embedded

import (
	"context"
	"sync"
)

// keyedLock is a set of mutexes, one per key, made on first use and dropped when no caller
// holds or waits for it, so it does not grow with the number of keys ever seen. Waiting
// honours the caller's context. Safe for concurrent use.
type keyedLock struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	held chan struct{} // holds one token while the key is locked
	refs int           // holders and waiters; the entry goes when it drops to zero
}

func newKeyedLock() *keyedLock {
	return &keyedLock{m: map[string]*keyedEntry{}}
}

// lock waits until key is free and takes it, or returns ctx's error when ctx ends first.
// The caller must call unlock exactly once.
func (l *keyedLock) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	e := l.m[key]
	if e == nil {
		e = &keyedEntry{held: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.held <- struct{}{}:
		return func() {
			<-e.held
			l.release(key, e)
		}, nil
	case <-ctx.Done():
		l.release(key, e)
		return nil, ctx.Err()
	}
}

func (l *keyedLock) release(key string, e *keyedEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.refs--
	if e.refs == 0 {
		delete(l.m, key)
	}
}

// size is the number of keys held or waited for; tests use it.
func (l *keyedLock) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
