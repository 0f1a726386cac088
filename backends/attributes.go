package backends

import "go.opentelemetry.io/otel/attribute"

// Span attributes shared by the gateway's server spans and the backends' client spans, so a
// trace names the backend and the attempt the same way at every hop.
const (
	// AttrBackend is the name of the backend a call went to (csi.backend).
	AttrBackend = attribute.Key("csi.backend")
	// AttrAttempt is the number of the attempt, 1 for the first (csi.attempt).
	AttrAttempt = attribute.Key("csi.attempt")
)
