// Command bench is `make bench`: it measures what csi-gateway costs a CSI call, against a
// direct connection to the same driver and against two general-purpose relays, in one run.
//
// It starts three kinds of process: this program as the client, a minimal CSI driver (this
// binary again, re-executed with the CSI_GATEWAY_BENCH_BACKEND variable naming its socket: no
// disk, no mounts, answers from memory), and the relays, each listening on a Unix socket in
// front of that driver:
//
//	(a) direct      no relay: the client calls the driver's socket
//	(b) passthrough csi-gateway, validation off, logging at error, no tracing
//	(c) full        csi-gateway, validation enforce, info logs to a file, every call traced
//	                (sampled at 1.0, exported over OTLP/gRPC to a collector this program runs
//	                on loopback), metrics
//	(d) haproxy     HTTP/2 on both sides (mode http, proto h2)
//	(e) socat       a byte relay (UNIX-LISTEN,fork to UNIX-CONNECT)
//
// haproxy and socat are installed from Debian's packages when missing and this runs as root
// with apt-get (-install=false: never); otherwise their rows say "not installed".
//
// For each workload (Probe, CreateVolume with secrets, ListVolumes of 100 entries,
// NodePublishVolume, a GetMetadataAllocated stream) and concurrency (1, 16, 64) it runs every
// relay for one window in turn, for several rounds, and reports the medians of p50, p99 and
// calls/s, the relay's CPU per call (utime+stime of its process tree, from /proc), the
// gateway's heap allocations per call (go_memstats_mallocs_total from its /metrics), each
// relay's RSS idle and at peak, and how long the gateway took to answer its first Probe. It
// then runs the redaction micro-benchmark (proxy's BenchmarkRedactVsProtosanitizer) and
// writes everything, with the machine's description and the targets of issue #8 marked met
// or not, as Markdown (-out docs/benchmarks.md).
//
// Nothing here asserts a timing: the figures are recorded, not tested. The harness's own
// test runs it in a tiny mode and checks that it works and that its table parses.
package main
