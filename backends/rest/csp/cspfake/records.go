package cspfake

// recordKind is a kind of record a path names by its {id}: how the fake finds one, the
// message of the 404 for an ID it does not know, and the JSON a GET answers.
type recordKind[T any] struct {
	find    func(f *Fake, id string) *T
	missing string // a format given the ID
	json    func(f *Fake, r *T) any
}

var (
	volumeRecord = recordKind[volume]{
		find:    func(f *Fake, id string) *volume { return f.volumes[id] },
		missing: "Volume with id %s not found.",
		json:    func(_ *Fake, v *volume) any { return volumeToJSON(v) },
	}
	snapshotRecord = recordKind[snapshot]{
		find:    (*Fake).visibleSnapshot, // a hidden snapshot is gone for the API
		missing: "Snapshot not found %s",
		json:    func(f *Fake, s *snapshot) any { return f.snapshotJSON(s, true) },
	}
	volumeGroupRecord = recordKind[volumeGroup]{
		find:    func(f *Fake, id string) *volumeGroup { return f.volumeGroups[id] },
		missing: "volume group %s not found",
		json:    func(f *Fake, g *volumeGroup) any { return f.volumeGroupJSON(g) },
	}
	snapshotGroupRecord = recordKind[snapshotGroup]{
		find:    func(f *Fake, id string) *snapshotGroup { return f.snapshotGroups[id] },
		missing: "snapshot group %s not found",
		json:    func(f *Fake, sg *snapshotGroup) any { return f.snapshotGroupJSON(sg) },
	}
)

// getRecord is the handler of GET /{records}/{id} for records of kind k: the record's JSON.
func getRecord[T any](k recordKind[T]) func(*Fake, *request) reply {
	return func(f *Fake, q *request) reply {
		return withRecord(f, q, k, func(r *T) reply { return ok(k.json(f, r)) })
	}
}

// withRecord answers with handle of the record of kind k that the path's {id} names, or
// with a 404 (notFound) when there is none.
func withRecord[T any](f *Fake, q *request, k recordKind[T], handle func(*T) reply) reply {
	return withRecordOr(f.notFound, f, q.param("id"), k, handle)
}

// withDeletedRecord is withRecord for a DELETE, whose 404 is notFoundDelete's.
func withDeletedRecord[T any](f *Fake, q *request, k recordKind[T], handle func(*T) reply) reply {
	return withRecordOr(f.notFoundDelete, f, q.param("id"), k, handle)
}

// withRecordOr answers with handle of the record of kind k whose ID is id (the path's, or
// the parent a create's body names), or with missing's 404 when there is none.
func withRecordOr[T any](missing func(format string, args ...any) reply, f *Fake, id string, k recordKind[T], handle func(*T) reply) reply {
	r := k.find(f, id)
	if r == nil {
		return missing(k.missing, id)
	}
	return handle(r)
}
