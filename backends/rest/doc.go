// Package rest is the backend for storage appliances that speak HTTP rather than gRPC.
//
// Backend sends each unary CSI call as one HTTP request in the connect protocol (the
// Connect protocol's unary JSON form, docs/rest-protocol.md; its code tables and the
// server side live in the connect sub-package; the HPE CSP protocol is the csp
// sub-package): the caller's protobuf request is converted to protojson (codec.go),
// POSTed to {base URL}/{package.Service}/{Method}, and the answer converted back to
// protobuf wire bytes. The package owns these decisions:
//
//   - errors.go and transport.go: what an HTTP answer or a transport failure means, as a
//     backends.Class and a message for a person, scrubbed with the call's Scrubber and
//     bounded by backends.Truncate. A code in the error body wins; otherwise the status
//     decides, and a 404 without one is a misconfigured URL (unavailable), never "not
//     found", which DeleteVolume would turn into a success.
//   - retry.go: what is retried (transport failures, 429, 502, 503, 504), how long to
//     wait (capped, jittered, Retry-After honoured), and why retrying POSTs is safe here.
//   - call.go: the attempts of one call with go-retryablehttp, within the caller's
//     deadline, failing over across the configured URLs when one cannot be reached.
//   - guard.go: a circuit breaker per URL (an open one is skipped; all open fails fast)
//     and a retry budget per backend, so that an outage does not multiply the load.
//   - unknown.go: a request holding fields this gateway does not know is refused
//     (INVALID_ARGUMENT naming them), not sent with them silently dropped.
//   - plaintext.go: CSI secrets are not sent to an http:// URL unless the operator opts in
//     (allowSecretsOverPlaintextHTTP).
//   - auth.go: the appliance's credentials (bearer token or basic), read from files that
//     may rotate, sent over https only.
//
// It refuses streaming calls (use a grpc backend), never follows redirects, never logs,
// and never puts a request body, credentials, or more of a URL than scheme://host (and the
// method's path) in a message. TLS is configured with WithTLSConfig (or a whole client
// with WithHTTPClient), tracing with WithTracing.
package rest
