package cspfake

import (
	"net/http"
	"time"
)

// snapshot is a point-in-time copy of a volume.
type snapshot struct {
	seq         uint64
	id          string
	name        string
	description string
	volumeID    string
	size        int64
	config      map[string]any
	created     time.Time
	notReady    int  // GETs left that report ready_to_use=false
	hidden      bool // truenas quirk: "deleted" while a clone depends on it, yet still there
}

// Snapshot is a copy of a snapshot, for assertions. Hidden marks one the truenas profile
// answered 204 to a DELETE for without deleting it (a clone depends on it).
type Snapshot struct {
	ID, Name, VolumeID string
	Size               int64
	ReadyToUse         bool
	Hidden             bool
}

// Snapshots returns every snapshot, hidden ones included, in creation order.
func (f *Fake) Snapshots() []Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []Snapshot{}
	for _, s := range f.sortedSnapshots(func(*snapshot) bool { return true }) {
		out = append(out, Snapshot{
			ID: s.id, Name: s.name, VolumeID: s.volumeID, Size: s.size,
			ReadyToUse: s.notReady == 0, Hidden: s.hidden,
		})
	}
	return out
}

func (f *Fake) sortedSnapshots(keep func(*snapshot) bool) []*snapshot {
	ss := []*snapshot{}
	for _, s := range f.snapshots {
		if keep(s) {
			ss = append(ss, s)
		}
	}
	return bySeq(ss, func(s *snapshot) uint64 { return s.seq })
}

// visibleSnapshot returns the snapshot with the id unless it is absent or hidden.
func (f *Fake) visibleSnapshot(id string) *snapshot {
	if s := f.snapshots[id]; s != nil && !s.hidden {
		return s
	}
	return nil
}

// snapshotJSON is the ContainerVolumeSnapshot answer. in_use is not in openapi.yaml; the
// HPE model reads it (hpe profile only, deviation list).
type snapshotJSON struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Size         int64          `json:"size"`
	Description  string         `json:"description"`
	Config       map[string]any `json:"config"`
	VolumeID     string         `json:"volume_id"`
	VolumeName   string         `json:"volume_name"`
	CreationTime int64          `json:"creation_time"`
	ReadyToUse   bool           `json:"ready_to_use"`
	InUse        *bool          `json:"in_use,omitempty"`
}

// snapshotJSON describes s. A read (a GET answer) counts towards SnapshotReadyAfter.
func (f *Fake) snapshotJSON(s *snapshot, read bool) snapshotJSON {
	j := snapshotJSON{
		ID: s.id, Name: s.name, Size: s.size, Description: s.description, Config: s.config,
		VolumeID: s.volumeID, CreationTime: s.created.Unix(), ReadyToUse: s.notReady == 0,
	}
	if v := f.volumes[s.volumeID]; v != nil {
		j.VolumeName = v.name
	}
	if f.opts.Profile == ProfileHPE {
		inUse := f.hasClone(s.id)
		j.InUse = &inUse
	}
	if read && s.notReady > 0 {
		s.notReady--
	}
	return j
}

// newSnapshot records a snapshot of v. Callers have checked the name is free.
func (f *Fake) newSnapshot(v *volume, name, description string, config map[string]any) *snapshot {
	s := &snapshot{
		seq: f.nextSeq(), id: hexID(), name: name, description: description, volumeID: v.id,
		size: v.size, config: config, created: time.Now(), notReady: f.opts.SnapshotReadyAfter,
	}
	if f.truenas() {
		s.id = v.id + "@" + name
	}
	f.snapshots[s.id] = s
	return s
}

func (f *Fake) snapshotByName(volumeID, name string) *snapshot {
	for _, s := range f.snapshots {
		if s.volumeID == volumeID && s.name == name {
			return s
		}
	}
	return nil
}

// createSnapshot is POST /snapshots. A name already used on the volume is a 409;
// truenas-csp answers the existing snapshot instead.
func (f *Fake) createSnapshot(q *request) reply {
	r := fieldReader{body: q.body}
	name, volumeID, description := r.str("name"), r.str("volume_id"), r.str("description")
	config := r.object("config")
	if problem := r.problem("name", "volume_id"); problem != "" {
		return f.badRequest("%s", problem)
	}
	return withRecordOr(f.notFound, f, volumeID, volumeRecord, func(v *volume) reply {
		if s := f.snapshotByName(volumeID, name); s != nil {
			if f.truenas() {
				return ok(f.snapshotJSON(s, false))
			}
			return f.conflict("volume %s already has a snapshot named %s", v.name, name)
		}
		return ok(f.snapshotJSON(f.newSnapshot(v, name, description, config), false))
	})
}

// listSnapshots is GET /snapshots?volume_id=&name=&mode=. The spec and hpe profiles
// accept a missing volume_id (openapi.yaml makes it optional) and search every volume;
// truenas answers 400, as spec.md's "mandatory" allows. An unknown volume_id or an absent
// named snapshot is 404; truenas-csp also answers 404 for an empty list.
func (f *Fake) listSnapshots(q *request) reply {
	volumeID, name, mode := q.queryValue("volume_id"), q.queryValue("name"), q.queryValue("mode")
	switch {
	case mode != "" && mode != "exists" && !f.truenas():
		return f.badRequest("mode must be exists")
	case volumeID == "" && f.truenas():
		return falconError(http.StatusBadRequest, "Missing parameter", `The "volume_id" parameter is required.`)
	case volumeID != "" && f.volumes[volumeID] == nil:
		return f.notFound("Volume with id %s not found.", volumeID)
	}
	found := f.sortedSnapshots(func(s *snapshot) bool {
		return !s.hidden && (volumeID == "" || s.volumeID == volumeID) && (name == "" || s.name == name)
	})
	switch {
	case len(found) == 0 && (name != "" || f.truenas()):
		return f.notFound("No snapshots found on volume %s.", volumeID)
	case mode == "exists" && len(found) > 1 && !f.truenas():
		found = found[:1]
	}
	out := []snapshotJSON{}
	for _, s := range found {
		out = append(out, f.snapshotJSON(s, true))
	}
	return ok(out)
}

// deleteSnapshot is DELETE /snapshots/{id}: 409 while a clone depends on it. truenas-csp
// answers 204 without deleting instead: the snapshot drops out of every answer but stays.
func (f *Fake) deleteSnapshot(q *request) reply {
	return withDeletedRecord(f, q, snapshotRecord, func(s *snapshot) reply {
		if f.hasClone(s.id) {
			if f.truenas() {
				s.hidden = true
				return noContent()
			}
			return f.conflict("snapshot %s has clones", s.name)
		}
		f.removeSnapshot(s)
		return noContent()
	})
}

// removeSnapshot deletes s, and takes it out of its snapshot group.
func (f *Fake) removeSnapshot(s *snapshot) {
	delete(f.snapshots, s.id)
	for _, g := range f.snapshotGroups {
		for i, id := range g.snapshotIDs {
			if id == s.id {
				g.snapshotIDs = append(g.snapshotIDs[:i:i], g.snapshotIDs[i+1:]...)
				break
			}
		}
	}
}
