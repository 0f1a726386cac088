package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
)

// heapAllocMetric is the Go runtime's heap held by objects, live or not yet collected, which
// the gateway's /metrics exports: right after a collection it is the live heap.
const heapAllocMetric = "csigw_go_memstats_heap_alloc_bytes"

const (
	// soakConcurrency is the soak's calls in flight.
	soakConcurrency = 16
	// soakNames is how many volume names (and volume IDs) each soak worker cycles through:
	// a bounded set, as a cluster has, so state the gateway keeps per object must be freed
	// or reused for the heap to stay flat.
	soakNames = 32
	// soakSampleEvery is how often the soak reads the gateway's heap and RSS.
	soakSampleEvery = 200 * time.Millisecond
	// soakWindowShare: the first and the last 1/soakWindowShare of the soak's calls are the
	// windows whose live heaps are compared.
	soakWindowShare = 10
)

// soakMix is what each soak worker calls, in this order, over and over (worker w starting at
// position w): per 20 calls, 7 CreateVolume with secrets and 7 NodePublishVolume, each
// cycling through soakNames objects of the worker's own, 4 Probe, 1 ListVolumes100 and 1
// GetMetadataAllocated stream.
var soakMix = []string{
	"CreateVolume", "NodePublishVolume", "Probe", "CreateVolume", "NodePublishVolume",
	"CreateVolume", "NodePublishVolume", "Probe", "ListVolumes100", "CreateVolume",
	"NodePublishVolume", "CreateVolume", "NodePublishVolume", "Probe", "CreateVolume",
	"NodePublishVolume", "CreateVolume", "NodePublishVolume", "Probe", "GetMetadataAllocated",
}

// soakMixCounts says how many calls of each workload one pass of soakMix makes, in the
// workloads' order: "4 Probe, 7 CreateVolume, …, 1 GetMetadataAllocated".
func soakMixCounts() string {
	var parts []string
	for _, wl := range workloads {
		if n := countOf(soakMix, wl.name); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, wl.name))
		}
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
	}
	return strings.Join(parts, ", ")
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// soakNamed are the workloads of soakMix whose object cycles through soakNames; the others
// send one request per worker.
var soakNamed = map[string]bool{"CreateVolume": true, "NodePublishVolume": true}

// soakResult is what the soak measured.
type soakResult struct {
	relay string
	// calls were made (errors of them failed), over elapsed.
	calls, errors int
	firstError    error
	elapsed       time.Duration
	// firstHeap and lastHeap estimate the live heap over the first and the last tenth of the
	// calls: the least heap_alloc sampled in each (it drops to the live heap after every
	// collection). -1 when no sample fell in the window.
	firstHeap, lastHeap int64
	firstSamples        int
	lastSamples         int
	// peakRSS is the greatest VmRSS of the gateway's process tree sampled during the soak.
	peakRSS int64
}

// measured says whether both windows have a live-heap estimate.
func (s *soakResult) measured() bool {
	return s != nil && s.firstHeap >= 0 && s.lastHeap >= 0
}

// flat applies the target's rule: the last tenth's live heap is at most the first's plus
// maxHeapGrowth of it plus heapGrowthSlack.
func (s *soakResult) flat() bool {
	return float64(s.lastHeap) <= float64(s.firstHeap)*(1+maxHeapGrowth)+heapGrowthSlack
}

// soakRelay is the relay the soak runs through: the full gateway, else passthrough; nil when
// neither runs.
func soakRelay(relays []*relay) *relay {
	var found *relay
	for _, r := range relays {
		switch r.name {
		case "full":
			return r
		case "passthrough":
			found = r
		}
	}
	return found
}

// soakSample is one reading of the gateway during the soak.
type soakSample struct {
	done int64 // calls completed when it was taken
	heap int64 // heapAllocMetric
	rss  int64
	// mark is the window a worker took the sample for (markFirst, markLast), whatever done
	// had reached by then; 0 for the ticker's samples, which done places.
	mark int
}

const (
	markFirst = 1 + iota
	markLast
)

// runSoak makes total calls of soakMix through r at soakConcurrency, reading the gateway's
// heapAllocMetric and RSS every soakSampleEvery, and estimates its live heap over the first
// and the last tenth of the calls. It fails if a reading fails (the gateway is gone) or ctx
// ends; failed calls are counted, not fatal.
func runSoak(ctx context.Context, r *relay, total int, progress io.Writer) (*soakResult, error) {
	soakCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		issued, done atomic.Int64
		sm           = &soakSampler{relay: r, done: &done, cancel: cancel}
		mu           sync.Mutex
		res          = &soakResult{relay: r.name, firstHeap: -1, lastHeap: -1}
		wg           sync.WaitGroup
	)
	// The ticker may miss a short window, so the worker whose call ends the first tenth, and
	// the one whose call leaves only the last calls in flight, each take a sample as well.
	window := max(int64(total)/soakWindowShare, 1)
	lastStart := int64(total) - window
	markAt := map[int64]int{window: markFirst, max(lastStart+1, int64(total)-soakConcurrency): markLast}

	tickerDone := make(chan struct{})
	go func() {
		defer close(tickerDone)
		tick := time.NewTicker(soakSampleEvery)
		defer tick.Stop()
		step := int64(total) / 10
		next := step
		for {
			select {
			case <-soakCtx.Done():
				return
			case <-tick.C:
			}
			s, ok := sm.take(soakCtx, 0)
			if !ok {
				return
			}
			if step > 0 && s.done >= next {
				fmt.Fprintf(progress, "bench: soak: %d calls, heap %s, RSS %s\n", s.done, mib(s.heap), mib(s.rss))
				next = (s.done/step + 1) * step
			}
		}
	}()

	start := time.Now()
	for w := range soakConcurrency {
		wg.Go(func() {
			steps := soakSteps(w)
			var errs int
			var first error
			for i := w; soakCtx.Err() == nil && issued.Add(1) <= int64(total); i++ {
				st := steps[i%len(steps)]
				req := st.reqs[st.next%len(st.reqs)]
				st.next++
				callCtx, callCancel := context.WithTimeout(soakCtx, callTimeout)
				err := st.wl.call(callCtx, r.clients, req)
				callCancel()
				if err != nil {
					errs++
					first = cmp.Or(first, err)
				}
				if m, ok := markAt[done.Add(1)]; ok {
					sm.take(soakCtx, m)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.errors += errs
			res.firstError = cmp.Or(res.firstError, first)
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.calls = int(done.Load())
	cancel()
	<-tickerDone
	if sm.err != nil {
		return nil, fmt.Errorf("soak: %s: %w", r.name, sm.err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, s := range sm.samples {
		res.peakRSS = max(res.peakRSS, s.rss)
		switch {
		case s.mark == markFirst || s.mark == 0 && s.done > 0 && s.done <= window:
			res.firstHeap = minHeap(res.firstHeap, s.heap)
			res.firstSamples++
		case s.mark == markLast || s.mark == 0 && s.done > lastStart:
			res.lastHeap = minHeap(res.lastHeap, s.heap)
			res.lastSamples++
		}
	}
	return res, nil
}

// soakSampler reads the gateway during the soak and keeps the readings; safe for concurrent
// use. The first failed reading is kept in err and cancels the soak.
type soakSampler struct {
	relay  *relay
	done   *atomic.Int64
	cancel context.CancelFunc

	mu      sync.Mutex
	samples []soakSample
	err     error
}

// take reads the gateway's heap from its /metrics and its process tree's RSS, and records
// them with mark; false when the reading failed.
func (sm *soakSampler) take(ctx context.Context, mark int) (soakSample, bool) {
	s := soakSample{done: sm.done.Load(), mark: mark}
	heap, err := scrapeMetric(ctx, sm.relay.admin, heapAllocMetric)
	if err == nil {
		s.heap = int64(heap)
		s.rss, _, err = treeMemory(sm.relay.proc.pid())
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil && sm.err == nil {
			sm.err = err
			sm.cancel()
		}
		return s, false
	}
	sm.samples = append(sm.samples, s)
	return s, true
}

func minHeap(cur, h int64) int64 {
	if cur < 0 {
		return h
	}
	return min(cur, h)
}

// soakStep is one position of soakMix in a worker: the workload, and the requests it
// cycles through (shared by every position of the same workload).
type soakStep struct {
	wl   workload
	reqs []proto.Message
	next int
}

// soakSteps builds worker w's requests for soakMix once, with the workloads' own builders:
// the soakNames objects of a named workload are w*soakNames to w*soakNames+soakNames-1.
func soakSteps(w int) []*soakStep {
	byName := map[string]*soakStep{}
	steps := make([]*soakStep, len(soakMix))
	for i, name := range soakMix {
		st, ok := byName[name]
		if !ok {
			st = &soakStep{wl: workloadNamed(name)}
			n := 1
			if soakNamed[name] {
				n = soakNames
			}
			for j := range n {
				st.reqs = append(st.reqs, st.wl.request(w*soakNames+j))
			}
			byName[name] = st
		}
		steps[i] = st
	}
	return steps
}

// workloadNamed returns the workload called name; soakMix names only workloads that exist,
// which TestSoakMix checks.
func workloadNamed(name string) workload {
	for _, wl := range workloads {
		if wl.name == name {
			return wl
		}
	}
	panic("bench: no workload " + name)
}
