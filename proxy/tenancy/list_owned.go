package tenancy

import (
	"context"
	"crypto/sha256"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A token of a listing served from the ledger's index (listOwned) holds a position: the
// backend ID of the page's last entry, after ownedMark (a backend's own next_token, list's,
// never starts with NUL) and 'i'. Sealed, a token holds at most MaxBackendToken bytes: an ID
// too long for that is kept as 'h', its first bytes and a hash of it, and found again among
// the tenant's IDs that start with those bytes (resume).
const (
	ownedMark        = "\x00"
	positionHashSize = 8
	maxExactPosition = MaxBackendToken - len(ownedMark) - 1
	positionPrefix   = maxExactPosition - positionHashSize
)

// position is where a listing served from the index goes on: after the ID after, or, when
// hash is set, after the ID that starts with after and has that hash.
type position struct{ after, hash string }

func positionHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return string(sum[:positionHashSize])
}

// ownedToken returns the plaintext of the token of a page ending at the ID last.
func ownedToken(last string) string {
	if len(last) <= maxExactPosition {
		return ownedMark + "i" + last
	}
	return ownedMark + "h" + last[:positionPrefix] + positionHash(last)
}

// ownedPosition returns the position of a token's plaintext, ok false for a backend's token
// (a listing list began) or the start.
func ownedPosition(token string) (p position, ok bool) {
	rest, ok := strings.CutPrefix(token, ownedMark)
	switch {
	case !ok || rest == "":
		return position{}, false
	case rest[0] == 'h' && len(rest) > positionHashSize:
		return position{after: rest[1 : len(rest)-positionHashSize], hash: rest[len(rest)-positionHashSize:]}, true
	default:
		return position{after: rest[1:]}, true
	}
}

// resume returns the ID a listing goes on after. A long ID's position is found among the
// tenant's IDs starting with its first bytes; when it is gone (deleted since), the listing
// goes on from the first of those, which may list some of them again: a listing is not a
// snapshot, and a repeated entry is harmless where a skipped one is not.
func (c *call) resume(ctx context.Context, p position) (string, error) {
	if p.hash == "" {
		return p.after, nil
	}
	const batch = 100
	for after := p.after; ; {
		ids, err := c.l.store.owned(ctx, c.tenant, Volume, after, batch)
		if err != nil {
			return "", ledgerError(err)
		}
		for _, id := range ids {
			if !strings.HasPrefix(id, p.after) {
				return p.after, nil
			}
			if positionHash(id) == p.hash {
				return id, nil
			}
		}
		if len(ids) < batch {
			return p.after, nil
		}
		after = ids[len(ids)-1]
	}
}

// listOwned serves a tenant's ListVolumes from the ledger's index of the tenant's volumes
// (Store.owned) rather than from the backend's listing of every tenant's: the tenant's
// volume IDs are read from the ledger in backend-ID order, a page at a time, and each
// volume's entry is the backend's ControllerGetVolume of it, which carries what a
// ListVolumes entry does (the volume and its status: the nodes it is published on). So a
// tenant's full listing costs the backend one entry per volume the tenant owns, whatever the
// other tenants hold. A volume the backend says is NOT_FOUND (deleted behind the gateway's
// back) is left out: the listing is the backend's truth, not the ledger's; its record stays
// until a DeleteVolume forgets it, as after a crash.
//
// The next_token is the ledger position (the last ID of the page: ownedToken) sealed for the
// tenant and the method, as list's are (tokens): it survives other volumes' creation and
// deletion, and is accepted by every replica with the token key.
//
// handled is false when the backend cannot answer ControllerGetVolume (UNIMPLEMENTED: it
// does not advertise GET_VOLUME) on a listing's first page: the caller then pages the
// backend's ListVolumes (list), as before. A later page of such a listing cannot happen: its
// token would not have been issued.
func (c *call) listOwned(ctx context.Context, req *csi.ListVolumesRequest, from position) (resp proto.Message, handled bool, err error) {
	after, err := c.resume(ctx, from)
	if err != nil {
		return nil, true, err
	}
	first := after == ""
	want := int(req.GetMaxEntries())
	out := &csi.ListVolumesResponse{}
	for {
		limit := 0 // all of them
		if want > 0 {
			limit = want - len(out.Entries) + 1 // one more tells whether a next page exists
		}
		ids, err := c.l.store.owned(ctx, c.tenant, Volume, after, limit)
		if err != nil {
			return nil, true, ledgerError(err)
		}
		for _, id := range ids {
			if want > 0 && len(out.Entries) == want {
				sealed, err := c.l.tokens.seal(c.tenant, c.method, ownedToken(after))
				if err != nil {
					return nil, true, err
				}
				out.NextToken = sealed
				return out, true, c.scopeResponse(out)
			}
			got, err := c.invoke(ctx, getVolume, &csi.ControllerGetVolumeRequest{VolumeId: id})
			switch status.Code(err) {
			case codes.OK:
				v := got.(*csi.ControllerGetVolumeResponse)
				out.Entries = append(out.Entries, &csi.ListVolumesResponse_Entry{Volume: v.GetVolume(), Status: &csi.ListVolumesResponse_VolumeStatus{
					PublishedNodeIds: v.GetStatus().GetPublishedNodeIds(),
				}})
			case codes.NotFound:
			case codes.Unimplemented:
				if first && len(out.Entries) == 0 {
					return nil, false, nil
				}
				return nil, true, err
			default:
				return nil, true, err
			}
			after = id
		}
		if limit == 0 || len(ids) < limit {
			return out, true, c.scopeResponse(out)
		}
	}
}
