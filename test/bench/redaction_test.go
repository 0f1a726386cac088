package main

import (
	"strings"
	"testing"
)

const redactionOutput = `goos: linux
goarch: amd64
pkg: github.com/csi-gateway/csi-gateway/redact
cpu: Intel(R) Xeon(R) Processor
BenchmarkRedactVsProtosanitizer/Probe/Redact-2         	  911372	       268.8 ns/op	      48 B/op	       1 allocs/op
BenchmarkRedactVsProtosanitizer/Probe/RedactJSON-2     	  211982	       952.5 ns/op	     280 B/op	       8 allocs/op
BenchmarkRedactVsProtosanitizer/Probe/Protosanitizer-2 	  855748	       632.2 ns/op	      80 B/op	       4 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/Redact-2  	   10000	     24000 ns/op	    3289 B/op	      74 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/RedactJSON-2         	    4066	     66380 ns/op	   11183 B/op	     196 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/Protosanitizer-2     	    5341	     120000 ns/op	    7739 B/op	     132 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/Redact-2  	   10000	     22000 ns/op	    3289 B/op	      74 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/RedactJSON-2         	    4066	     66000 ns/op	   11183 B/op	     196 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/Protosanitizer-2     	    5341	     110000 ns/op	    7739 B/op	     132 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/Redact-2  	   10000	     26000 ns/op	    3289 B/op	      74 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/RedactJSON-2         	    4066	     67000 ns/op	   11183 B/op	     196 allocs/op
BenchmarkRedactVsProtosanitizer/CreateVolume/Protosanitizer-2     	    5341	     130000 ns/op	    7739 B/op	     132 allocs/op
PASS
ok  	github.com/csi-gateway/csi-gateway/redact	4.321s
`

func TestParseRedactionBenchmark(t *testing.T) {
	res, err := parseRedactionBenchmark(redactionOutput)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].message != "Probe" || res[1].message != "CreateVolume" {
		t.Fatalf("messages %+v, want Probe then CreateVolume", res)
	}
	cv := res[1].figures
	if got := cv[variantRedact]; got.nsPerOp != 24000 || got.allocsPerOp != 74 {
		t.Errorf("CreateVolume/Redact = %+v, want the median 24000 ns and 74 allocs", got)
	}
	if got := res[1].speedup(variantRedact); got != 5 {
		t.Errorf("CreateVolume speed-up of Redact = %v, want 120000/24000 = 5", got)
	}
}

func TestParseRedactionBenchmarkRefusesIncompleteOutput(t *testing.T) {
	if _, err := parseRedactionBenchmark("PASS\n"); err == nil || !strings.Contains(err.Error(), "no "+redactionBenchmark) {
		t.Errorf("no results: error %v", err)
	}
	missing := strings.ReplaceAll(redactionOutput, "Probe/RedactJSON", "Probe/Other")
	if _, err := parseRedactionBenchmark(missing); err == nil || !strings.Contains(err.Error(), "Probe/RedactJSON: no result") {
		t.Errorf("a variant missing: error %v", err)
	}
}
