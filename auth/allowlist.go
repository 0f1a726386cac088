package auth

import (
	"fmt"
	"slices"
)

// UIDAllowList admits callers on a Unix socket whose user or group ID is listed. An empty
// list (no UIDs and no GIDs) admits every caller the socket's file mode lets in.
type UIDAllowList struct {
	UIDs []uint32
	GIDs []uint32
}

// Authorize returns nil when id may call, or an error saying why not. It fails closed: an
// identity without Unix credentials is refused when the list is not empty.
func (a UIDAllowList) Authorize(id Identity) error {
	if len(a.UIDs) == 0 && len(a.GIDs) == 0 {
		return nil
	}
	if id.Kind != "unix" {
		return fmt.Errorf("the caller's Unix credentials are unknown and this listener only admits listed users")
	}
	if slices.Contains(a.UIDs, id.UID) || slices.Contains(a.GIDs, id.GID) {
		return nil
	}
	return fmt.Errorf("uid %d (gid %d) is not in this listener's allowUIDs/allowGIDs", id.UID, id.GID)
}
