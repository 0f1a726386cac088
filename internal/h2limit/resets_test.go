package h2limit

import (
	"testing"
	"time"
)

func TestResetBudget(t *testing.T) {
	b := NewResetBudget(10)
	now := time.Unix(1000, 0)
	for i := 0; i < 10; i++ {
		if !b.Spend(now) {
			t.Fatalf("reset %d of a burst of 10 refused", i+1)
		}
	}
	if b.Spend(now) {
		t.Fatal("the 11th reset of a burst of 10 at once was allowed")
	}
	// A tenth of a second later, one more.
	now = now.Add(100 * time.Millisecond)
	if !b.Spend(now) {
		t.Fatal("no reset regained after 100 ms at 10/s")
	}
	if b.Spend(now) {
		t.Fatal("two resets regained after 100 ms at 10/s")
	}
	// Ten a second, sustained, always allowed.
	for i := 0; i < 100; i++ {
		now = now.Add(100 * time.Millisecond)
		if !b.Spend(now) {
			t.Fatalf("reset %d at 10/s refused", i)
		}
	}
	// A long pause refills up to the burst, not beyond.
	now = now.Add(time.Hour)
	for i := 0; i < 10; i++ {
		if !b.Spend(now) {
			t.Fatalf("reset %d after a pause refused", i+1)
		}
	}
	if b.Spend(now) {
		t.Fatal("a pause gave more than the burst")
	}
}
