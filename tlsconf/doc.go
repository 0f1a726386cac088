// Package tlsconf builds TLS configurations from PEM files — for listeners (Server: client
// certificates required) and for dialling backends (Client: the server verified against a
// pinned CA bundle, optionally by SPIFFE ID, and a client certificate presented when one is
// configured) — with TLS 1.3 by default (1.2 by choice, nothing lower) and hot reload of
// certificates without a restart: the files are polled, parsed whole and published
// atomically; a file that cannot be loaded keeps the previous material and is logged.
//
// It does not decide who may call (auth does, from the verified certificate), and it does not
// use grpc's certprovider/pemfile: that provider reports load errors only to grpclog, has no
// synchronous reload for SIGHUP and no hook for the certificate's expiry.
package tlsconf
