package tenancy

import (
	"context"
	"crypto/sha256"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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

// resume returns the ID a listing of the tenant's objects of kind goes on after. A long
// ID's position is found among the tenant's IDs starting with its first bytes; when it is
// gone (deleted since), the listing goes on from the first of those, which may list some of
// them again: a listing is not a snapshot, and a repeated entry is harmless where a skipped
// one is not.
func (c *call) resume(ctx context.Context, kind Kind, p position) (string, error) {
	if p.hash == "" {
		return p.after, nil
	}
	const batch = 100
	for after := p.after; ; {
		ids, err := c.l.store.owned(ctx, c.tenant, kind, after, batch)
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

// ownedListing is how a List method is served from the ledger's index (listOwned): the kind
// it lists, the method that reads one object by its ID, that method's request for an ID (with
// the listing's secrets, where it has any), and the listing's entry made of its answer (nil:
// the object is not listed).
type ownedListing struct {
	kind    Kind
	get     string
	request func(list proto.Message, id string) proto.Message
	entry   func(got proto.Message) proto.Message
	// filtered, if set, reports a request with a filter naming one of the tenant's objects
	// (scopeRequest answered any other): the backend's own listing answers it at the cost of
	// that object's entries, which are the tenant's, and applies the filter as its spec says.
	filtered func(list proto.Message) bool
}

// ownedListings are the List methods served from the ledger's index.
var ownedListings = map[string]ownedListing{
	listVolumes: {kind: Volume, get: getVolume,
		request: func(_ proto.Message, id string) proto.Message { return &csi.ControllerGetVolumeRequest{VolumeId: id} },
		entry: func(got proto.Message) proto.Message {
			v := got.(*csi.ControllerGetVolumeResponse)
			return &csi.ListVolumesResponse_Entry{Volume: v.GetVolume(), Status: &csi.ListVolumesResponse_VolumeStatus{
				PublishedNodeIds: v.GetStatus().GetPublishedNodeIds(),
			}}
		}},
	// A plugin that lists volume health MUST get it too (LIST_VOLUME_HEALTH implies
	// GET_VOLUME_HEALTH), and the listing leaves out, as the spec advises, the volumes with no
	// adverse condition: those whose health has no statuses.
	listVolumeHealth: {kind: Volume, get: getVolumeHealth,
		request: func(list proto.Message, id string) proto.Message {
			return &csi.ControllerGetVolumeHealthRequest{VolumeId: id, Secrets: list.(*csi.ControllerListVolumeHealthRequest).GetSecrets()}
		},
		entry: func(got proto.Message) proto.Message {
			if h := got.(*csi.ControllerGetVolumeHealthResponse).GetVolumeHealth(); len(h.GetHealthStatuses()) > 0 {
				return h
			}
			return nil
		}},
	listSnapshots: {kind: Snapshot, get: getSnapshot,
		request: func(list proto.Message, id string) proto.Message {
			return &csi.GetSnapshotRequest{SnapshotId: id, Secrets: list.(*csi.ListSnapshotsRequest).GetSecrets()}
		},
		entry: func(got proto.Message) proto.Message {
			return &csi.ListSnapshotsResponse_Entry{Snapshot: got.(*csi.GetSnapshotResponse).GetSnapshot()}
		},
		filtered: func(list proto.Message) bool {
			req := list.(*csi.ListSnapshotsRequest)
			return req.GetSnapshotId() != "" || req.GetSourceVolumeId() != ""
		}},
	listVolumeGroups: {kind: VolumeGroup, get: getVolumeGroup,
		request: func(list proto.Message, id string) proto.Message {
			return &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: id, Secrets: list.(*volumegroup.ListVolumeGroupsRequest).GetSecrets()}
		},
		entry: func(got proto.Message) proto.Message {
			return &volumegroup.ListVolumeGroupsResponse_Entry{VolumeGroup: got.(*volumegroup.ControllerGetVolumeGroupResponse).GetVolumeGroup()}
		}},
}

// listOwned serves a tenant's listing (ListVolumes, ListSnapshots, ListVolumeGroups: see
// ownedListings) from the ledger's index of the tenant's objects of its kind (Store.owned)
// rather than from the backend's listing of every tenant's: the tenant's IDs are read from
// the ledger in backend-ID order, a page at a time, and each object's entry is the backend's
// answer to the kind's get method (ControllerGetVolume, GetSnapshot,
// ControllerGetVolumeGroup), which carries what a listing's entry does. So a tenant's full
// listing costs the backend one entry per object the tenant owns, whatever the other tenants
// hold. An object the backend says is NOT_FOUND (deleted behind the gateway's back, or
// between the ledger's read and the backend's) is left out: the listing is the backend's
// truth, not the ledger's; its record stays until a delete forgets it, as after a crash.
//
// The next_token is the ledger position (the last ID of the page: ownedToken) sealed for the
// tenant and the method, as list's are (tokens): it survives other objects' creation and
// deletion, and is accepted by every replica with the token key.
//
// handled is false when the backend cannot answer the get method (UNIMPLEMENTED: it does not
// advertise GET_VOLUME, GET_SNAPSHOT or GET_VOLUME_GROUP) on a listing's first page: the
// caller then pages the backend's listing (list), as before. A later page of such a listing
// cannot happen: its token would not have been issued.
func (c *call) listOwned(ctx context.Context, req proto.Message, o ownedListing, from position) (resp proto.Message, handled bool, err error) {
	after, err := c.resume(ctx, o.kind, from)
	if err != nil {
		return nil, true, err
	}
	first := after == ""
	out, err := newResponse(c.method)
	if err != nil {
		return nil, true, err
	}
	m := out.ProtoReflect()
	fields := m.Descriptor().Fields()
	entries := m.Mutable(fields.ByName("entries")).List()
	want := int(req.ProtoReflect().Get(req.ProtoReflect().Descriptor().Fields().ByName("max_entries")).Int())
	for {
		limit := 0 // all of them
		if want > 0 {
			limit = want - entries.Len() + 1 // one more tells whether a next page exists
		}
		ids, err := c.l.store.owned(ctx, c.tenant, o.kind, after, limit)
		if err != nil {
			return nil, true, ledgerError(err)
		}
		for _, id := range ids {
			if want > 0 && entries.Len() == want {
				sealed, err := c.l.tokens.seal(c.tenant, c.method, ownedToken(after))
				if err != nil {
					return nil, true, err
				}
				m.Set(fields.ByName("next_token"), protoreflect.ValueOfString(sealed))
				return out, true, c.scopeResponse(out)
			}
			got, err := c.invoke(ctx, o.get, o.request(req, id))
			switch status.Code(err) {
			case codes.OK:
				if e := o.entry(got); e != nil {
					entries.Append(protoreflect.ValueOfMessage(e.ProtoReflect()))
				}
			case codes.NotFound:
			case codes.Unimplemented:
				if first && entries.Len() == 0 {
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
