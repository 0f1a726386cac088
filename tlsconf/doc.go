// Package tlsconf builds TLS configurations for listeners and backends from PEM files, with
// TLS 1.3 by default and hot reload of certificates without a restart.
package tlsconf
