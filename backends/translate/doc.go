// Package translate lets a CSI caller and a backend that speak different versions of the
// spec work together: a v1 caller (today's Kubernetes, Nomad) in front of a driver that
// speaks only CSI v0 (v0.2 or v0.3), and a v0 caller (an old orchestrator) in front of any
// v1 backend (a v1 driver, a REST appliance, the embedded appliance).
//
// Backend wraps any backends.Backend: a call in the version the backend speaks passes
// untouched; a call in the other version is decoded, converted field by field into the
// backend's version (rpcs.go lists every method and how its messages convert; cross.go
// carries the fields that cross as they are, with the one table of fields v0 names
// differently), sent, and its answer converted back. What
// has no counterpart in the other version is refused, never silently dropped when it
// matters (a v1 access mode v0 lacks, a clone source) and UNIMPLEMENTED for the RPCs the
// other version has no equivalent of; capabilities are intersected so that a caller is never
// told the backend can do what the translation cannot carry. docs/versions.md has the
// mapping table, field by field, and what cannot cross.
//
// It refuses to change anything else: errors of the backend pass unchanged (the gateway's
// canonicalize turns them into the codes of the caller's version's tables), metadata and
// deadlines pass as the wrapped backend passes them, methods of other services (VolumeGroup,
// a vendor's) and streams pass untouched.
package translate
