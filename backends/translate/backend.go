package translate

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/csi-gateway/csi-gateway/backends"
)

// Backend is a backend that takes calls of both CSI versions and sends each to the backend it
// wraps in the version that backend speaks. It is safe for concurrent use.
//
// A backend of version Auto (a grpc driver whose version was not configured) is asked nothing
// until it answers a CSI call with UNIMPLEMENTED: until then calls pass untouched, as they
// did before translation existed, so a driver that speaks its callers' version never sees a
// call of the gateway's own. On its first UNIMPLEMENTED the gateway asks the driver which
// version it speaks (detect) and, when it speaks the other one, sends the same call again
// translated; the answer is kept for the backend's life (a driver changes version only by
// being replaced, and the gateway restarts with its new configuration).
type Backend struct {
	name  string
	inner backends.Backend
	// speaks is V1, V0, or Auto until detected.
	speaks *versionCache
	// targets are the target paths created for a v0 driver (targetpath.go).
	targets createdPaths
}

// New wraps inner, the backend called name, which speaks version (V1, V0 or Auto).
func New(name string, inner backends.Backend, version Version) *Backend {
	return &Backend{name: name, inner: inner, speaks: newVersionCache(version)}
}

// Unary sends a unary call: untouched when the backend speaks the caller's version or the
// method is of another service, translated otherwise. A v1 RPC that CSI v0 has no equivalent
// of is UNIMPLEMENTED for a v0 driver.
func (b *Backend) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	caller := callerVersion(method)
	if caller == "" {
		return b.inner.Unary(ctx, method, req)
	}
	speaks := b.speaks.get()
	if speaks == Auto {
		resp, err := b.inner.Unary(ctx, method, req)
		if backends.ClassOf(err) != backends.ClassUnimplemented {
			return resp, err
		}
		if speaks = b.detect(ctx); speaks == Auto || speaks == caller {
			return resp, err // the driver's own UNIMPLEMENTED: it speaks the caller's version
		}
	}
	if speaks == caller {
		return b.inner.Unary(ctx, method, req)
	}
	return b.translate(ctx, method, req)
}

// translate sends the call of the other version through its translation, or answers
// UNIMPLEMENTED when there is none.
func (b *Backend) translate(ctx context.Context, method string, req []byte) ([]byte, error) {
	r, ok := translations[method]
	if !ok {
		return nil, backends.Errorf(backends.ClassUnimplemented,
			"backend %q: %s has no equivalent in the CSI version the driver speaks (%s); the gateway does not advertise it",
			b.name, method, other(callerVersion(method)))
	}
	return r.call(ctx, b, req)
}

// other is the version a caller of version v is translated to.
func other(v Version) Version {
	if v == V1 {
		return V0
	}
	return V1
}

// Stream forwards a stream untouched: CSI v0 has no streaming RPC, and v1's (SnapshotMetadata)
// have no v0 equivalent, so a v0 driver answers them UNIMPLEMENTED itself.
func (b *Backend) Stream(ctx context.Context, method string, caller grpc.ServerStream) error {
	return b.inner.Stream(ctx, method, caller)
}

// Ready reports whether the backend can take calls: the wrapped backend's own check (a v1
// Probe for a grpc driver), or for a v0 driver its v0 Probe.
func (b *Backend) Ready(ctx context.Context) error {
	speaks := b.speaks.get()
	if speaks != V0 {
		err := b.inner.Ready(ctx)
		if speaks == V1 || backends.ClassOf(err) != backends.ClassUnimplemented {
			return err
		}
		if b.detect(ctx) != V0 {
			return err
		}
	}
	return probeV0(ownCall(ctx), b.name, b.inner)
}

// Close closes the wrapped backend.
func (b *Backend) Close() error { return b.inner.Close() }

// Breakers are the wrapped backend's circuit breakers (backends.BreakerReporter), if any.
func (b *Backend) Breakers() []*backends.Breaker {
	if r, ok := b.inner.(backends.BreakerReporter); ok {
		return r.Breakers()
	}
	return nil
}

// RetryBudget is the wrapped backend's retry budget (backends.BudgetReporter), if any.
func (b *Backend) RetryBudget() *backends.RetryBudget {
	if r, ok := b.inner.(backends.BudgetReporter); ok {
		return r.RetryBudget()
	}
	return nil
}

// detect asks the driver which version it speaks, once for the backend's life (see Backend);
// Auto when it cannot tell yet (the driver unreachable, ctx done).
func (b *Backend) detect(ctx context.Context) Version {
	return b.speaks.detect(ctx, func(ctx context.Context) Version {
		return askVersion(ownCall(ctx), b.inner)
	})
}

// askVersion calls each version's Identity/GetPluginInfo, v1 first: the first one the driver
// implements (any answer but UNIMPLEMENTED) is what it speaks; one that implements neither
// speaks v1 as far as the gateway is concerned (its answers pass as it gives them). A failure
// that says nothing of the driver's version (unreachable, timed out) leaves it Auto.
func askVersion(ctx context.Context, be backends.Backend) Version {
	for _, v := range []Version{V1, V0} {
		_, err := be.Unary(ctx, "/csi."+string(v)+".Identity/GetPluginInfo", nil)
		switch class := backends.ClassOf(err); {
		case err == nil:
			return v
		case class.Transient() || class == backends.ClassCanceled || ctx.Err() != nil:
			return Auto
		case class != backends.ClassUnimplemented:
			return v
		}
	}
	return V1
}

// ownCall is the context of a call the gateway makes for itself within a caller's call: the
// caller's deadline and cancellation, but none of its metadata, and attempts counted apart.
func ownCall(ctx context.Context) context.Context {
	ctx = metadata.NewIncomingContext(ctx, metadata.MD{})
	ctx, _ = backends.WithCallInfo(ctx)
	return ctx
}
