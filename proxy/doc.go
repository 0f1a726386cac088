// Package proxy is the gateway's call path: listeners, the gRPC server that accepts every
// method, and the one middleware chain every call passes, composed in Server.handler (its
// order, and a call followed through it, are in docs/architecture.md). It also holds what
// that chain needs and no other package would: the route table, per-object serialization,
// the capability cache the spec rules gate by, error canonicalization, metrics, readiness,
// the admin endpoints (/metrics, /healthz, /readyz, /debug/tap), graceful shutdown, the
// admission of callers in each listener's handshake and the listeners' hard limits
// (TransportLimits), the same on both transports (on grpc-go's with a call guard around the
// handler and an h2limit.Conn under each connection), and the services every listener answers
// itself before the chain (gRPC health and reflection: builtin.go). Redaction and scrubbing
// are package redact's, the CSI spec's rules package csispec's.
//
// The methods it decodes (methods.go) are those of the compiled-in packages — csi.v1,
// volumegroup, and csi.v0 (internal/csiv0; not scoped for tenants) — and of the descriptor
// sets an operator configures (descriptors.go: dynamic messages, not CSI). Any other method is
// forwarded as raw frames.
//
// It owns no storage logic: every call is handed to a backend chosen by the route table, as
// the raw bytes the caller sent.
package proxy
