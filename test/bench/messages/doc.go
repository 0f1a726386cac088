// Package messages holds the CSI requests and responses of the benchmark workloads, built
// the way the Kubernetes sidecars and kubelet fill them in: secrets, mount flags, volume and
// publish contexts, topology. The load program (test/bench) sends and answers them, and the
// redaction micro-benchmark (proxy) redacts them, so both measure the same messages.
//
// Every builder returns a new message; the caller may keep or change it. The package holds
// no state and does no I/O.
package messages
