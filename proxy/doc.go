// Package proxy is the gateway's call path: listeners, the gRPC server that accepts every
// method, the middleware chain (recover, authenticate, decode, log, route), per-RPC error
// canonicalization, redaction and graceful shutdown.
//
// It owns no storage logic: every call is handed to a backend chosen by the route table.
package proxy
