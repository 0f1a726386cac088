// Package redact keeps secrets out of everything the gateway writes about a call: out of
// protobuf messages by schema (Redactor), and out of free text by value (Scrubber).
//
// It is this project's answer to csi-lib-utils' protosanitizer, which the Kubernetes sidecars
// use to log requests: protosanitizer's StripSecrets formats a message with its csi_secret
// fields replaced. This package covers what that leaves out:
//
//   - fields the spec calls sensitive without marking them (VolumeCapability.MountVolume's
//     mount_flags, and every secret of CSI v0, which predates the marker), volume_context,
//     publish_context and volume_group_context values and v0's attributes and publish_info (minus
//     keys an operator declares safe), the csi-addons VolumeGroup option (vg_csi_secret),
//     and fields named by configuration (WithSecretFields, for protos without markers);
//   - messages known only at run time (dynamicpb, descriptors whose options arrive as unknown
//     fields), unknown fields dropped rather than passed on;
//   - a redacted copy of the message (Redact), not only a string, and the secret values
//     themselves (SecretValues) so they can be scrubbed from text;
//   - text: a call's secret values, in every form a backend is likely to echo them (flattened,
//     trimmed, line by line, base64, URL- and JSON-escaped), out of error messages, log lines,
//     span attributes and the tap (Scrubber);
//   - speed: each message type's schema is walked once into a cached plan, and the JSON of a
//     debug log line is written straight from the message (Redactor.JSON), at a fraction of
//     protosanitizer's cost and allocations (BenchmarkRedactVsProtosanitizer).
//
// It knows nothing of calls, routes or the middleware chain: package proxy decides when to
// redact and scrub; cmd/csi-gateway's `call` uses the same Redactor to print what it sends.
// testdata/redact_json.golden pins Redactor.JSON's output byte for byte.
package redact
