package auth

import (
	"context"
	"fmt"
)

// Identity is who is calling, as established by the listener the call arrived on.
type Identity struct {
	// Kind is how the identity was established: "unix" (peer credentials of a Unix socket)
	// or "anonymous" (no credentials could be read).
	Kind string
	// UID, GID and PID are the caller's process credentials on a Unix socket.
	UID, GID uint32
	PID      int32
}

func (id Identity) String() string {
	if id.Kind == "unix" {
		return fmt.Sprintf("uid=%d gid=%d pid=%d", id.UID, id.GID, id.PID)
	}
	return id.Kind
}

type identityKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the caller's identity, and false when the call carries none.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
