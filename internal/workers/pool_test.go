package workers

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestPoolRunsEveryFunction: functions run concurrently (none waits for another to finish),
// each exactly once.
func TestPoolRunsEveryFunction(t *testing.T) {
	p := New(time.Minute)
	const n = 50
	var wg sync.WaitGroup
	release := make(chan struct{})
	ran := make([]int, n)
	for i := range n {
		wg.Add(1)
		p.Go(func() {
			defer wg.Done()
			<-release // all n are running at once, or this never returns
			ran[i]++
		})
	}
	close(release)
	wg.Wait()
	for i, c := range ran {
		if c != 1 {
			t.Errorf("function %d ran %d times", i, c)
		}
	}
}

// TestPoolKeepsItsGoroutines: functions run one after another reuse the goroutines of the
// ones before, and the goroutines end once idle for the pool's idle time.
func TestPoolKeepsItsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	p := New(200 * time.Millisecond)
	const n = 20
	seen := map[string]bool{}
	for range n {
		done := make(chan string)
		p.Go(func() { done <- goroutineName() })
		seen[<-done] = true
		// Let the goroutine go back to waiting for work; one that has not yet when the next
		// function comes makes the pool start another, which is allowed, but rarely.
		time.Sleep(5 * time.Millisecond)
	}
	if len(seen) > n/2 {
		t.Errorf("%d functions run one after another ran on %d goroutines, want far fewer", n, len(seen))
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after the idle time, want %d", runtime.NumGoroutine(), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goroutineName is the "goroutine N" that starts the calling goroutine's stack trace.
func goroutineName() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	name, _, _ := bytes.Cut(buf, []byte(" ["))
	return string(name)
}
