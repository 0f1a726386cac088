package embedded

// The shapes every controller RPC of the appliance takes on its records (volumes, snapshots,
// volume groups, group snapshots): read one, list a page, create one with its image files,
// delete one with its image files. Each RPC says what is particular to it; these say the rest
// once.

// record is a record that listings page through in creation order (a named one).
type record interface {
	sequence() int64
}

// getRecord answers a Get RPC: the first failed check (the request's fields, in the RPC's
// order), else record id of the live state rendered by render, or NOT_FOUND naming kind.
func getRecord[T, R any](a *Appliance, kind, id string, records func(*state) map[string]*T, render func(*state, *T) (R, error), checks ...error) (R, error) {
	var out R
	if err := firstError(checks...); err != nil {
		return out, err
	}
	err := a.view(func(s *state) error {
		r := records(s)[id]
		if r == nil {
			return notFound(kind, id)
		}
		var err error
		out, err = render(s, r)
		return err
	})
	return out, err
}

// listPage answers a List RPC: the page of the live state's records that token and
// maxEntries name (page, the token tied to kind), each rendered by entry, and the next
// page's token.
func listPage[T record, E any](a *Appliance, kind string, records func(*state) []T, token string, maxEntries int32, entry func(*state, T) E) (entries []E, next string, err error) {
	err = a.view(func(s *state) error {
		items, n, err := page(kind, records(s), func(r T) int64 { return r.sequence() }, token, maxEntries)
		if err != nil {
			return err
		}
		next = n
		for _, r := range items {
			entries = append(entries, entry(s, r))
		}
		return nil
	})
	return entries, next, err
}

// createWithImages runs fn in one state change (update). fn appends to *images the path of
// each image file it creates; when the state that would name them is not written, they are
// removed.
func createWithImages[R any](a *Appliance, fn func(s *state, images *[]string) (R, error)) (R, error) {
	var out R
	var images []string
	err := a.update(func(s *state) error {
		var err error
		out, err = fn(s, &images)
		return err
	})
	if err != nil {
		for _, path := range images {
			a.images.remove(path)
		}
		var zero R
		return zero, err
	}
	return out, nil
}

// deleteRecord answers a Delete RPC: the first failed check, else del of record id in one
// state change (a record already gone is OK, as the spec requires, and del is not called),
// then the removal of the image files, at imagePath, of the IDs del returns; attrs are logged
// with a removal that fails.
func deleteRecord[T any](a *Appliance, id string, records func(*state) map[string]*T, del func(*state, *T) ([]string, error), imageKind string, imagePath func(id string) string, attrs []any, checks ...error) error {
	if err := firstError(checks...); err != nil {
		return err
	}
	var deleted []string
	err := a.update(func(s *state) error {
		r := records(s)[id]
		if r == nil {
			return nil
		}
		var err error
		deleted, err = del(s, r)
		return err
	})
	if err != nil {
		return err
	}
	a.removeDeletedImages(imageKind, imagePath, deleted, attrs...)
	return nil
}

// deleteOne is deleteRecord of a record of kind whose one image is at imagePath(id), named
// by the request's field: refuse says why the record must stay, or returns nil.
func deleteOne[T any](a *Appliance, kind, field, id string, records func(*state) map[string]*T, imagePath func(id string) string, refuse func(*T) error) error {
	return deleteRecord(a, id, records, func(s *state, r *T) ([]string, error) {
		if err := refuse(r); err != nil {
			return nil, err
		}
		delete(records(s), id)
		return []string{id}, nil
	}, kind, imagePath, nil, checkRequired(field, id))
}

// each returns f of every item, in order: the capabilities of a service from its list of
// RPC types, say.
func each[T, R any](items []T, f func(T) R) []R {
	out := make([]R, 0, len(items))
	for _, it := range items {
		out = append(out, f(it))
	}
	return out
}

// respond returns resp, or nil and err when err is set: the answer of an RPC whose response
// is known before its work is done.
func respond[R any](resp *R, err error) (*R, error) {
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func volumesOf(s *state) map[string]*volume               { return s.Volumes }
func snapshotsOf(s *state) map[string]*snapshot           { return s.Snapshots }
func groupsOf(s *state) map[string]*volumeGroup           { return s.Groups }
func groupSnapshotsOf(s *state) map[string]*groupSnapshot { return s.GroupSnapshots }
