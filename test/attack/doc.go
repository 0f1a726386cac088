// Package attack runs the real csi-gateway binary, on each transport, against what an
// attacker on loopback can send: HTTP/2 floods and oversized frames from a raw client
// (golang.org/x/net/http2's Framer and hpack), callers the gateway must refuse, and the
// h2spec conformance suite. Each attack case checks that the gateway's peak RSS stays under
// a bound, that a bystander's Probe calls are all answered throughout, and that the attacker
// gets a protocol error or a refused connection (docs/security.md). It has no code of its
// own.
package attack
