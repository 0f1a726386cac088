// Package rest is the backend for storage appliances that speak HTTP rather than gRPC. Its
// wire protocols live in sub-packages; connect (the Connect protocol's unary JSON form) is
// the default.
package rest
