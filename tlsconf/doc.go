// Package tlsconf builds TLS configurations for listeners from PEM files, with TLS 1.3 by
// default (1.2 by choice, nothing lower), client certificates required, and hot reload of
// certificates without a restart: the files are polled, parsed whole and published
// atomically; a file that cannot be loaded keeps the previous material and is logged.
//
// It does not decide who may call (auth does, from the verified certificate), and it does not
// use grpc's certprovider/pemfile: that provider reports load errors only to grpclog, has no
// synchronous reload for SIGHUP and no hook for the certificate's expiry.
package tlsconf
