package embedded

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestKeyedLockSerializesOneKey: holders of one key never overlap; the lock is dropped after.
func TestKeyedLockSerializesOneKey(t *testing.T) {
	l := newKeyedLock()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			unlock, err := l.lock(context.Background(), "vol-1")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			unlock()
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders at once, want 1", most.Load())
	}
	if l.size() != 0 {
		t.Errorf("%d keys left, want 0", l.size())
	}
}

// TestKeyedLockKeysAreIndependent: holding one key does not block another.
func TestKeyedLockKeysAreIndependent(t *testing.T) {
	l := newKeyedLock()
	unlockA, err := l.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer unlockA()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	unlockB, err := l.lock(ctx, "b")
	if err != nil {
		t.Fatalf("key b waited for key a: %v", err)
	}
	unlockB()
}

// TestKeyedLockHonoursContext: a waiter gives up when its context ends and leaves no trace.
func TestKeyedLockHonoursContext(t *testing.T) {
	l := newKeyedLock()
	unlock, err := l.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	unlock()
	if l.size() != 0 {
		t.Errorf("%d keys left, want 0", l.size())
	}
}
