// Package protoread reads protobuf messages faster than protoreflect does, for the hot paths
// of the gateway: Struct reads a generated message's fields from its Go struct with plain
// reflect (maps, lists, nested messages and scalars, which protoreflect allocates for), and
// WireStrings and its kin read singular string fields straight off a message's wire bytes
// without decoding the rest.
//
// It is internal because both readers serve exactly two callers each, with their contracts:
// the redactor (package redact) and the CSI rule engine (package csispec) read structs; the
// gateway's serialization keys, call records and paging guard (package proxy) read the wire.
// It knows nothing of CSI, secrets or calls, and imports nothing of this module.
package protoread
