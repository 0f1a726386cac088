// Package rest is the backend for storage appliances that speak HTTP rather than gRPC.
//
// Backend sends each unary CSI call as one HTTP request in the connect protocol (the
// Connect protocol's unary JSON form, docs/rest-protocol.md; its code tables and the
// server side live in the connect sub-package): the caller's protobuf request is
// converted to protojson, POSTed to {base URL}/{package.Service}/{Method}, and the answer
// converted back to protobuf wire bytes. The package owns three decisions:
//
//   - errors.go and transport.go: what an HTTP answer or a transport failure means, as a
//     backends.Class and a message for a person. A code in the error body wins; otherwise the status
//     decides, and a 404 without one is a misconfigured URL (unavailable), never "not
//     found", which DeleteVolume would turn into a success.
//   - retry.go: what is retried (transport failures, 429, 502, 503, 504), how long to
//     wait (capped, jittered, Retry-After honoured), and why retrying POSTs is safe here.
//   - call.go: the attempts of one call with go-retryablehttp, within the caller's
//     deadline, failing over across the configured URLs when one cannot be reached.
//   - guard.go: a circuit breaker per URL (an open one is skipped; all open fails fast)
//     and a retry budget per backend, so that an outage does not multiply the load.
//
// It refuses streaming calls (use a grpc backend), never follows redirects, never logs,
// and never puts a request body, credentials, or more of a URL than scheme://host (and the
// method's path) in a message.
// TLS and appliance credentials are configured through WithHTTPClient.
package rest
