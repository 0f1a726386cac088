package tenancy

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// testCreateHoldsConcurrentAndReleased: concurrent creates of distinct names take exactly the
// quota's room in holds; the holds survive a reopen (a restart, another replica), are listed
// with their tenant, name, bytes and time, and an operator's release gives each one's room
// back (a name that has none is refused, naming the listing).
func testCreateHoldsConcurrentAndReleased(t *testing.T, open opener) {
	quotas := map[string]Quota{"blue": {MaxVolumes: 5}}
	ctx := t.Context()
	before := time.Now()
	l := open(t, quotas)
	const n = 20
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		admitted, failed int
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := l.reserve(ctx, "blue", 1, mib, fmt.Sprintf("blue.pvc-%02d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
			} else {
				admitted++
			}
		})
	}
	close(start)
	wg.Wait()
	if admitted != 5 || failed != n-5 {
		t.Fatalf("%d of %d concurrent creates against maxVolumes 5 held room (%d refused)", admitted, n, failed)
	}
	l.Close() // their process dies, or their replica, with the creates in flight

	l = open(t, quotas)
	if u := l.usageNow("blue"); u != (usage{volumes: 5, bytes: 5 * mib}) {
		t.Errorf("usage after a reopen = %+v; want the 5 holds", u)
	}
	holds, err := CreateHolds(ctx, l.store)
	if err != nil || len(holds) != 5 {
		t.Fatalf("create holds: %+v, %v; want 5", holds, err)
	}
	for i, h := range holds {
		if h.Tenant != "blue" || h.Bytes != mib || h.Taken.Before(before.Add(-time.Second)) || h.Taken.After(time.Now()) ||
			(i > 0 && holds[i-1].Name >= h.Name) {
			t.Errorf("hold %d = %+v; want blue's, of 1 MiB, taken during the test, sorted by name", i, h)
		}
	}
	if _, err := ReleaseCreateHold(ctx, l.store, "blue", "blue.never-held"); !errors.Is(err, ErrNoHold) {
		t.Errorf("releasing a hold that does not exist: %v; want ErrNoHold", err)
	}
	for _, h := range holds {
		got, err := ReleaseCreateHold(ctx, l.store, h.Tenant, h.Name)
		if err != nil || got.Name != h.Name || got.Bytes != mib {
			t.Errorf("release of %s: %+v, %v", h.Name, got, err)
		}
	}
	if u := l.usageNow("blue"); u != (usage{}) {
		t.Errorf("usage after every hold was released = %+v; want none", u)
	}
	l.Close()
	l = open(t, quotas)
	if holds, err := CreateHolds(ctx, l.store); err != nil || len(holds) != 0 || l.usageNow("blue") != (usage{}) {
		t.Errorf("after a reopen: holds %+v (%v), usage %+v; want none", holds, err, l.usageNow("blue"))
	}
}
