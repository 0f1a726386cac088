package main

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// TestSoakMix checks that soakMix names only workloads, and that each worker cycles through
// soakNames volumes of its own.
func TestSoakMix(t *testing.T) {
	for _, name := range soakMix {
		workloadNamed(name) // panics on a name that is not a workload
	}
	if got, want := soakMixCounts(), "4 Probe, 7 CreateVolume, 1 ListVolumes100, 7 NodePublishVolume and 1 GetMetadataAllocated"; got != want {
		t.Errorf("soakMixCounts() = %q, want %q", got, want)
	}
	names := map[string]int{}
	for w := range 2 {
		for _, st := range soakSteps(w) {
			if st.wl.name != "CreateVolume" {
				continue
			}
			if len(st.reqs) != soakNames {
				t.Fatalf("worker %d: %d CreateVolume requests, want %d", w, len(st.reqs), soakNames)
			}
			for _, req := range st.reqs {
				names[req.(*csi.CreateVolumeRequest).GetName()] = w
			}
		}
	}
	if len(names) != 2*soakNames {
		t.Errorf("two workers name %d volumes, want %d of their own", len(names), 2*soakNames)
	}
}

func TestSoakVerdict(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		res         results
		result      string
		measuredHas string
	}{
		{"off", results{soakSkipped: "-soak 0"}, notMeasured, "no soak: -soak 0"},
		{"no sample", results{soak: &soakResult{relay: "full", calls: 10, firstHeap: -1, lastHeap: 3 * mib}}, notMeasured, "no heap sample"},
		{"flat", results{soak: &soakResult{relay: "full", calls: 1000000, firstHeap: 10 * mib, lastHeap: 12 * mib}}, "met",
			"first 10%: 10.0 MiB, last 10%: 12.0 MiB over 1000000 calls"},
		{"grew", results{soak: &soakResult{relay: "passthrough", calls: 1000000, firstHeap: 10 * mib, lastHeap: 12*mib + 1}}, "not met",
			"last 10%: 12.0 MiB"},
	} {
		v := soakVerdict(&tc.res)
		if v.result != tc.result || !strings.Contains(v.measured, tc.measuredHas) {
			t.Errorf("%s: result %q, measured %q; want %q, containing %q", tc.name, v.result, v.measured, tc.result, tc.measuredHas)
		}
	}
}
