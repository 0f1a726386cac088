package tenancy

import (
	"sync"
	"time"
)

// observed is a StoreObserver that keeps what it was told.
type observed struct {
	mu         sync.Mutex
	requests   map[string]int // by method
	failed     int
	leasesLost int
}

func (o *observed) StoreRequest(method string, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.requests == nil {
		o.requests = map[string]int{}
	}
	o.requests[method]++
	if err != nil {
		o.failed++
	}
}

func (o *observed) LeaseLost() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leasesLost++
}

func (o *observed) counts() (requests map[string]int, leasesLost int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	requests = map[string]int{}
	for m, n := range o.requests {
		requests[m] = n
	}
	return requests, o.leasesLost
}
