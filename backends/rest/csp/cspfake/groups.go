package cspfake

import "time"

// volumeGroup is a volume collection. Membership is volume.groupID.
type volumeGroup struct {
	seq         uint64
	id          string
	name        string
	description string
	config      map[string]any
	created     time.Time
}

// snapshotGroup is a snapshot of every member of a volume group.
type snapshotGroup struct {
	seq         uint64
	id          string
	name        string
	groupID     string
	config      map[string]any
	created     time.Time
	snapshotIDs []string
}

// volumeStub is a member in a VolumeGroup answer.
type volumeStub struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// volumeGroupJSON is the VolumeGroup answer.
type volumeGroupJSON struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	Config       map[string]any `json:"config"`
	Volumes      []volumeStub   `json:"volumes"`
	CreationTime int64          `json:"creation_time"`
}

func (f *Fake) volumeGroupJSON(g *volumeGroup) volumeGroupJSON {
	members := []volumeStub{}
	for _, v := range f.members(g.id) {
		members = append(members, volumeStub{ID: v.id, Name: v.name})
	}
	return volumeGroupJSON{
		ID: g.id, Name: g.name, Description: g.description, Config: g.config,
		Volumes: members, CreationTime: g.created.Unix(),
	}
}

// members returns the group's volumes in creation order.
func (f *Fake) members(groupID string) []*volume {
	out := []*volume{}
	for _, v := range f.sortedVolumes() {
		if v.groupID == groupID {
			out = append(out, v)
		}
	}
	return out
}

func (f *Fake) sortedVolumeGroups() []*volumeGroup {
	return inOrder(f.volumeGroups, func(g *volumeGroup) uint64 { return g.seq })
}

// createVolumeGroup is POST /volume_groups; a name in use is a 409.
func (f *Fake) createVolumeGroup(q *request) reply {
	r := fieldReader{body: q.body}
	name, description := r.str("name"), r.str("description")
	config := r.object("config")
	if problem := r.problem("name"); problem != "" {
		return f.badRequest("%s", problem)
	}
	for _, g := range f.volumeGroups {
		if g.name == name {
			return f.conflict("a volume group named %s already exists", name)
		}
	}
	g := &volumeGroup{seq: f.nextSeq(), id: hexID(), name: name, description: description, config: config, created: time.Now()}
	f.volumeGroups[g.id] = g
	return ok(f.volumeGroupJSON(g))
}

// listVolumeGroups is GET /volume_groups[?name=]; an unknown name is 404.
func (f *Fake) listVolumeGroups(q *request) reply {
	_, named := q.query["name"]
	out := []volumeGroupJSON{}
	for _, g := range f.sortedVolumeGroups() {
		if !named || g.name == q.queryValue("name") {
			out = append(out, f.volumeGroupJSON(g))
		}
	}
	if named && len(out) == 0 {
		return f.notFound("volume group %s not found", q.queryValue("name"))
	}
	return ok(out)
}

// deleteVolumeGroup is DELETE /volume_groups/{id}: 409 while it has members.
func (f *Fake) deleteVolumeGroup(q *request) reply {
	return withRecord(f, q, volumeGroupRecord, func(g *volumeGroup) reply {
		if len(f.members(g.id)) > 0 {
			return f.conflict("volume group %s has volumes", g.name)
		}
		delete(f.volumeGroups, g.id)
		return noContent()
	})
}

// snapshotGroupJSON is the SnapshotGroup answer.
type snapshotGroupJSON struct {
	ID              string         `json:"id"`
	Name            string         `json:"name"`
	VolumeGroupID   string         `json:"volume_group_id"`
	VolumeGroupName string         `json:"volume_group_name"`
	Snapshots       []snapshotJSON `json:"snapshots"`
	Config          map[string]any `json:"config"`
	CreationTime    int64          `json:"creation_time"`
}

func (f *Fake) snapshotGroupJSON(sg *snapshotGroup) snapshotGroupJSON {
	j := snapshotGroupJSON{
		ID: sg.id, Name: sg.name, VolumeGroupID: sg.groupID, Snapshots: []snapshotJSON{},
		Config: sg.config, CreationTime: sg.created.Unix(),
	}
	if g := f.volumeGroups[sg.groupID]; g != nil {
		j.VolumeGroupName = g.name
	}
	for _, id := range sg.snapshotIDs {
		j.Snapshots = append(j.Snapshots, f.snapshotJSON(f.snapshots[id], false))
	}
	return j
}

// createSnapshotGroup is POST /snapshot_groups: snapshots every member of the volume
// group at once, each named after the snapshot group, or nothing at all.
func (f *Fake) createSnapshotGroup(q *request) reply {
	r := fieldReader{body: q.body}
	name, groupID := r.str("name"), r.str("volume_group_id")
	config := r.object("config")
	if problem := r.problem("name", "volume_group_id"); problem != "" {
		return f.badRequest("%s", problem)
	}
	return withRecordOr(f.notFound, f, groupID, volumeGroupRecord, func(g *volumeGroup) reply {
		for _, sg := range f.snapshotGroups {
			if sg.groupID == groupID && sg.name == name {
				return f.conflict("volume group %s already has a snapshot group named %s", g.name, name)
			}
		}
		members := f.members(groupID)
		if len(members) == 0 {
			return f.badRequest("volume group %s has no volumes", g.name)
		}
		for _, v := range members {
			if f.snapshotByName(v.id, name) != nil {
				return f.conflict("volume %s already has a snapshot named %s", v.name, name)
			}
		}
		config["is_complete"] = true
		sg := &snapshotGroup{seq: f.nextSeq(), id: hexID(), name: name, groupID: groupID, config: config, created: time.Now()}
		for _, v := range members {
			s := f.newSnapshot(v, name, "member of snapshot group "+name, map[string]any{})
			sg.snapshotIDs = append(sg.snapshotIDs, s.id)
		}
		f.snapshotGroups[sg.id] = sg
		return ok(f.snapshotGroupJSON(sg))
	})
}

// listSnapshotGroups is GET /snapshot_groups?volume_group_id= (400 without it, 404 for an
// unknown group).
func (f *Fake) listSnapshotGroups(q *request) reply {
	groupID := q.queryValue("volume_group_id")
	switch {
	case groupID == "":
		return f.badRequest("volume_group_id is required")
	case f.volumeGroups[groupID] == nil:
		return f.notFound("volume group %s not found", groupID)
	}
	sgs := []*snapshotGroup{}
	for _, sg := range f.snapshotGroups {
		if sg.groupID == groupID {
			sgs = append(sgs, sg)
		}
	}
	out := []snapshotGroupJSON{}
	for _, sg := range bySeq(sgs, func(sg *snapshotGroup) uint64 { return sg.seq }) {
		out = append(out, f.snapshotGroupJSON(sg))
	}
	return ok(out)
}

// deleteSnapshotGroup is DELETE /snapshot_groups/{id}: deletes the member snapshots too,
// or nothing when a clone depends on one of them (409).
func (f *Fake) deleteSnapshotGroup(q *request) reply {
	return withRecord(f, q, snapshotGroupRecord, func(sg *snapshotGroup) reply {
		for _, id := range sg.snapshotIDs {
			if f.hasClone(id) {
				return f.conflict("snapshot %s of group %s has clones", id, sg.name)
			}
		}
		for _, id := range append([]string(nil), sg.snapshotIDs...) {
			f.removeSnapshot(f.snapshots[id])
		}
		delete(f.snapshotGroups, sg.id)
		return noContent()
	})
}

// listReplicationPartners is GET /replication_partners[?name=]: there are none.
func (f *Fake) listReplicationPartners(q *request) reply {
	if _, named := q.query["name"]; named {
		return f.notFound("replication partner %s not found", q.queryValue("name"))
	}
	return ok([]struct{}{})
}
