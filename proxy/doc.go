// Package proxy is the gateway's call path: listeners, the gRPC server that accepts every
// method, and the one middleware chain every call passes (composed in Server.handler):
// recover, log, observe (the live tap), tracing annotations, metrics (calls in flight and
// finished), confine (method allow-lists, tenant), deadlines, spec validation, per-object
// serialization, tenant scoping (package tenancy), per-RPC error canonicalization and the List
// calls' paging guard, then routing to a backend. It also holds what that chain needs:
// redaction by schema and value scrubbing, the route table, readiness, the admin endpoints
// (/metrics, /healthz, /readyz, /debug/tap), graceful shutdown, the admission of callers in
// each listener's handshake and the listeners' hard limits (TransportLimits), the same on
// both transports.
//
// It owns no storage logic: every call is handed to a backend chosen by the route table, as
// the raw bytes the caller sent.
package proxy
