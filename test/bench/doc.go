// Command bench is `make bench`: it measures what csi-gateway costs a CSI call, against a
// direct connection to the same driver and against two general-purpose relays, in one run.
//
// It starts three kinds of process: this program as the client, a minimal CSI driver (this
// binary again, re-executed with the CSI_GATEWAY_BENCH_BACKEND variable naming its socket: no
// disk, no mounts, answers from memory), and the relays, each listening on a Unix socket in
// front of that driver:
//
//	(a) direct      no relay: the client calls the driver's socket
//	(b) passthrough csi-gateway on grpc-go (transport: grpc, the default), validation off,
//	                logging at error, no tracing
//	(c) full        csi-gateway on grpc-go, validation enforce, info logs to a file, every
//	                call traced (sampled at 1.0, exported over OTLP/gRPC to a collector this
//	                program runs on loopback), metrics
//	(g), (h)        (b) and (c) on the gateway's own HTTP/2 transport (transport: frames)
//	(d) haproxy     HTTP/2 on both sides (mode http, proto h2)
//	(e) socat       a byte relay (UNIX-LISTEN,fork to UNIX-CONNECT)
//	(f) floor       csi-gateway's HTTP/2 server and client (internal/h2grpc), nothing between
//
// haproxy and socat are installed from Debian's packages when missing and this runs as root
// with apt-get (-install=false: never); otherwise their rows say "not installed".
//
// For each workload (Probe, CreateVolume with secrets, ListVolumes of 100 entries,
// NodePublishVolume, a GetMetadataAllocated stream) and concurrency (1, 16, 64) it runs every
// relay for one window in turn, for several rounds, and reports the medians of p50, p99 and
// calls/s, the relay's CPU per call (utime+stime of its process tree, from /proc), the
// gateway's heap allocations per call (csigw_go_memstats_mallocs_total from its /metrics), each
// relay's RSS idle and at peak, and how long the gateway took to answer its first Probe. A
// table sets the gateway's CPU per call on its two transports side by side ((b) against (g),
// (c) against (h)): what the default, grpc-go, costs over frames.
//
// It then soaks the full gateway (passthrough when full is not among -relays): -soak calls
// (default a million; 0: none) at concurrency 16 of a mix of CreateVolume with secrets and
// NodePublishVolume, each worker cycling through a bounded set of names, with Probe,
// ListVolumes100 and GetMetadataAllocated among them, reading the gateway's
// csigw_go_memstats_heap_alloc_bytes and RSS every 200 ms. The least reading over the first and over
// the last tenth of the calls estimates the live heap (right after a collection the heap is
// what is live); the heap is flat when the last is at most the first × 1.10 + 1 MiB. The
// full gateway runs this mix at 2,000–10,000 calls/s (2,000 on two loaded cores), so a
// million calls add 2–8 minutes to `make bench`, and some 250 MiB of logs to its temporary
// directory.
//
// Last it runs the redaction micro-benchmark (redact's BenchmarkRedactVsProtosanitizer) and
// writes everything, with the machine's description and the targets of issue #8 marked met
// or not, as Markdown (-out docs/benchmarks.md).
//
// Nothing here asserts a timing: the figures are recorded, not tested. The harness's own
// test runs it in a tiny mode and checks that it works and that its table parses.
package main
