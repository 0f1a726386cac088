package tenancy

import (
	"context"
	"path"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// list serves a List call (ListVolumes, ListSnapshots, ControllerListVolumeHealth,
// ListVolumeGroups) with the tenant's entries only. ListVolumes, ListSnapshots and
// ListVolumeGroups are served from the ledger's index of the tenant's objects when the
// backend can get one object by its ID (listOwned, ownedListings); the rest, a listing
// whose backend cannot, and a ListSnapshots filtered by a snapshot or a source volume (the
// backend's filtered listing holds that object's entries only, all the tenant's), as
// follows.
//
// It asks the backend for as many entries as the tenant still wants and keeps the tenant's
// own; when other tenants' entries took some of the room it asks again from the backend's
// next_token. A page therefore always ends where one of the backend's pages ends, and the
// next_token the tenant gets is the backend's own, sealed for the tenant and the method
// (tokens): it stays valid exactly as long as the backend's does (and the token key), it
// reveals nothing of other tenants' objects, and no position has to be kept in the gateway.
//
// A backend whose next_token repeats a token of the listing would keep this loop asking for
// ever: the invoker must end such a listing with an error, as the gateway's does (proxy's
// guardListings, one rule for this path and the tenant-less one).
func (c *call) list(ctx context.Context, req proto.Message) (proto.Message, error) {
	fields := req.ProtoReflect().Descriptor().Fields()
	maxEntries, startingToken := fields.ByName("max_entries"), fields.ByName("starting_token")
	want := int(req.ProtoReflect().Get(maxEntries).Int())
	token, err := c.l.tokens.open(c.tenant, c.method, req.ProtoReflect().Get(startingToken).String())
	if err != nil {
		return nil, err
	}
	if o, ok := ownedListings[c.method]; ok {
		from, owned := ownedPosition(token)
		switch {
		case o.filtered != nil && o.filtered(req):
			if owned {
				return nil, status.Errorf(codes.Aborted, "csi-gateway: the starting_token is of a %s without filters: restart the listing with an empty starting_token", path.Base(c.method))
			}
		case owned || token == "":
			if resp, handled, err := c.listOwned(ctx, req, o, from); handled {
				return resp, err
			}
		}
	}
	var kept []protoreflect.Value
	for {
		page := proto.Clone(req).ProtoReflect()
		if want > 0 {
			page.Set(maxEntries, protoreflect.ValueOfInt32(int32(want-len(kept))))
		}
		page.Set(startingToken, protoreflect.ValueOfString(token))
		resp, err := c.invoke(ctx, c.method, page.Interface())
		if err != nil {
			return nil, err
		}
		m := resp.ProtoReflect()
		entriesField := m.Descriptor().Fields().ByName("entries")
		nextToken := m.Descriptor().Fields().ByName("next_token")
		entries := m.Get(entriesField).List()
		for i := range entries.Len() {
			id, ok := ownRef(entries.Get(i).Message(), c.b.lists)
			if !ok {
				continue
			}
			owned, err := c.owns(ctx, c.b.lists, id)
			if err != nil {
				return nil, err
			}
			if owned {
				kept = append(kept, entries.Get(i))
			}
		}
		next := m.Get(nextToken).String()
		if next == "" || (want > 0 && len(kept) >= want) || (want == 0 && len(kept) > 0) {
			m.Clear(entriesField)
			out := m.Mutable(entriesField).List()
			for _, e := range kept {
				out.Append(e)
			}
			sealed, err := c.l.tokens.seal(c.tenant, c.method, next)
			if err != nil {
				return nil, err
			}
			m.Set(nextToken, protoreflect.ValueOfString(sealed))
			return resp, c.scopeResponse(resp)
		}
		token = next
	}
}
