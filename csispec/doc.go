// Package csispec is the CSI spec's rule engine: what a request must hold before a plugin
// sees it, what a plugin's answer must hold before a caller sees it, and which RPCs and
// fields a plugin serves only with a capability it advertises (docs/validation.md lists
// the rules).
//
// CheckRequest and CheckResponse take a full method name, the decoded messages, the name of
// the backend (for messages) and what that backend advertises (Capabilities); they return
// Violations, each with the gRPC code the caller gets and a message that names field paths,
// sizes and topology keys but never a value the caller sent. The package knows nothing of
// the gateway's calls or routes, and of backends only their error classes:
// proxy/validate.go is the middleware that decodes a call, looks the capabilities up
// (proxy's capability cache, fetched with CapKind.Method and CapKind.Decode) and turns
// Violations into statuses or warnings.
//
// It also holds the spec's per-RPC error rules (errors.go): ErrorCode turns a backend's
// failure class into the code the RPC's section of the spec requires (DeleteVolume of a
// missing volume is OK), and docs/errors.md is generated from the same table.
//
// The rules are data, keyed by protobuf full names: requiredFields, the size and format
// sets (rules.go) and messageHooks (formats.go) by message or field name; methodGates,
// requestGates (gates.go), answerRules (answers.go) and errorRules (errors.go) by full method
// name. A message is walked by a plan compiled once per message type from those tables.
// Another spec version is added as more rows of the same tables, and its capability RPCs as
// more capRPCs, not as a second engine: CSI v0 (csi.v0, internal/csiv0) is rules_v0.go and the
// V0*Caps kinds.
//
// Safe for concurrent use; the tables are never modified after init.
package csispec
