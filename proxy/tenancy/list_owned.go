package tenancy

import (
	"context"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ownedMark starts the plaintext of a token of a listing served from the ledger's index
// (listOwned): the mark and the backend ID of the page's last entry. A backend's own
// next_token (list) never starts with NUL.
const ownedMark = "\x00"

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
// The next_token is the ledger position (the last ID of the page) sealed for the tenant and
// the method, as list's are (tokens): it survives other volumes' creation and deletion, and
// is accepted by every replica with the token key.
//
// handled is false when the backend cannot answer ControllerGetVolume (UNIMPLEMENTED: it
// does not advertise GET_VOLUME) on a listing's first page: the caller then pages the
// backend's ListVolumes (list), as before. A later page of such a listing cannot happen: its
// token would not have been issued.
func (c *call) listOwned(ctx context.Context, req *csi.ListVolumesRequest, after string) (resp proto.Message, handled bool, err error) {
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
				sealed, err := c.l.tokens.seal(c.tenant, c.method, ownedMark+after)
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
				if after == "" && len(out.Entries) == 0 {
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

// ownedPosition returns the ledger position of a token's plaintext, ok false for a
// backend's token (a listing list began).
func ownedPosition(token string) (after string, ok bool) {
	return strings.CutPrefix(token, ownedMark)
}
