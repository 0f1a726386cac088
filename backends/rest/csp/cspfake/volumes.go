package cspfake

import (
	"net/http"
	"sort"
	"strings"
)

// volume is a provisioned volume.
type volume struct {
	seq            uint64
	id             string
	name           string
	description    string
	size           int64
	config         map[string]any
	baseSnapshotID string // set for clones
	groupID        string
	serial         string
	pubs           map[string]*publication // by host uuid
}

// Volume is a copy of a volume, for assertions.
type Volume struct {
	ID, Name, Description string
	Size                  int64
	Published             bool
	Config                map[string]any
	BaseSnapshotID        string
	VolumeGroupID         string
	Serial                string
	Hosts                 []string // uuids of the hosts it is published to, sorted
}

// Volumes returns the volumes in creation order.
func (f *Fake) Volumes() []Volume {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []Volume{}
	for _, v := range f.sortedVolumes() {
		hosts := make([]string, 0, len(v.pubs))
		for uuid := range v.pubs {
			hosts = append(hosts, uuid)
		}
		sort.Strings(hosts)
		out = append(out, Volume{
			ID: v.id, Name: v.name, Description: v.description, Size: v.size, Published: len(v.pubs) > 0,
			Config: copyMap(v.config), BaseSnapshotID: v.baseSnapshotID, VolumeGroupID: v.groupID,
			Serial: v.serial, Hosts: hosts,
		})
	}
	return out
}

func (f *Fake) sortedVolumes() []*volume {
	return inOrder(f.volumes, func(v *volume) uint64 { return v.seq })
}

func (f *Fake) volumeByName(name string) *volume {
	for _, v := range f.volumes {
		if v.name == name {
			return v
		}
	}
	return nil
}

// volumeJSON is the ContainerVolume answer.
type volumeJSON struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	Size           int64          `json:"size"`
	Description    string         `json:"description"`
	Published      bool           `json:"published"`
	Config         map[string]any `json:"config"`
	BaseSnapshotID string         `json:"base_snapshot_id,omitempty"`
	Clone          bool           `json:"clone"`
	VolumeGroupID  string         `json:"volume_group_id,omitempty"`
}

func volumeToJSON(v *volume) volumeJSON {
	return volumeJSON{
		ID: v.id, Name: v.name, Size: v.size, Description: v.description, Published: len(v.pubs) > 0,
		Config: v.config, BaseSnapshotID: v.baseSnapshotID, Clone: v.baseSnapshotID != "", VolumeGroupID: v.groupID,
	}
}

// trueNASRoot is the parent dataset of truenas volumes unless config "root" says otherwise.
const trueNASRoot = "tank/csi"

// createVolume is POST /volumes: a new volume, or a clone of a snapshot when
// base_snapshot_id is set with clone:true.
func (f *Fake) createVolume(q *request) reply {
	r := fieldReader{body: q.body}
	name, description := r.str("name"), r.str("description")
	config := r.object("config")
	baseID, isClone := r.str("base_snapshot_id"), r.boolean("clone")
	groupID := r.str("volume_group_id")
	if problem := r.problem(); problem != "" {
		return f.badRequest("%s", problem)
	}
	size, sizeGiven, sizeOK := sizeField(q.body, "size")

	id := hexID()
	if f.truenas() {
		// truenas-csp reads config before anything else, maps ids to dataset paths by
		// "_" → "/", and has no volume groups.
		if q.body["config"] == nil {
			return traceback("on_post", "AttributeError: 'NoneType' object has no attribute 'get'")
		}
		root, _ := config["root"].(string)
		if root == "" {
			root = trueNASRoot
		}
		if strings.Contains(name, "_") || strings.Contains(root, "_") {
			return traceback("on_post", "Exception: b'{\"pool_dataset_create.name\": [{\"message\": \"Invalid dataset name: '_' is reserved by truenas-csp\", \"errno\": 22}]}'")
		}
		id = strings.ReplaceAll(root+"/"+name, "/", "_")
		if len(id) > 128 {
			return traceback("on_post", "Exception: b'{\"pool_dataset_create.name\": [{\"message\": \"Dataset name is too long\", \"errno\": 22}]}'")
		}
		groupID = ""
	}
	switch {
	case name == "":
		return f.badRequest("name is required")
	case !sizeOK:
		return f.badRequest("size must be a positive integer number of bytes")
	case baseID != "" && !isClone:
		return f.badRequest("base_snapshot_id requires clone: true")
	case isClone && baseID == "":
		return f.badRequest("clone requires base_snapshot_id")
	case !isClone && !sizeGiven:
		return f.badRequest("size is required")
	}
	if existing := f.volumeByName(name); existing != nil {
		switch {
		case f.truenas():
			return traceback("on_post", "Exception: b'{\"pool_dataset_create.name\": [{\"message\": \"Path "+
				strings.ReplaceAll(existing.id, "_", "/")+" already exists\", \"errno\": 17}]}'")
		case f.opts.ReturnExistingOnDuplicate:
			return ok(volumeToJSON(existing))
		}
		return f.conflict("a volume named %s already exists", name)
	}
	if isClone {
		snap := f.visibleSnapshot(baseID)
		switch {
		case snap == nil:
			return f.notFound("snapshot %s not found", baseID)
		case !sizeGiven:
			size = snap.size
		case size < snap.size:
			return f.badRequest("size %d is smaller than the snapshot's %d", size, snap.size)
		}
	}
	if groupID != "" && f.volumeGroups[groupID] == nil {
		return f.notFound("volume group %s not found", groupID)
	}
	v := &volume{
		seq: f.nextSeq(), id: id, name: name, description: description, size: size, config: config,
		baseSnapshotID: baseID, groupID: groupID, serial: randomHex(16), pubs: map[string]*publication{},
	}
	f.volumes[v.id] = v
	return ok(volumeToJSON(v))
}

// listVolumes is GET /volumes[?name=]. An unknown name is 404 (the HPE driver depends on
// it). truenas-csp answers a list without a name with an empty 200 body (its FIXME).
func (f *Fake) listVolumes(q *request) reply {
	if _, named := q.query["name"]; named {
		v := f.volumeByName(q.queryValue("name"))
		if v == nil {
			return f.notFound("Volume with name %s not found.", q.queryValue("name"))
		}
		return ok([]volumeJSON{volumeToJSON(v)})
	}
	if f.truenas() {
		return reply{status: http.StatusOK}
	}
	out := []volumeJSON{}
	for _, v := range f.sortedVolumes() {
		out = append(out, volumeToJSON(v))
	}
	return ok(out)
}

// mutableConfig lists the config keys PUT /volumes/{id} accepts, per profile.
var mutableConfig = map[Profile]map[string]bool{
	ProfileSpec:    {"description": true, "performance_policy": true, "limit_iops": true, "limit_mbps": true, "folder": true, "tier": true},
	ProfileHPE:     {"description": true, "performance_policy": true, "limit_iops": true, "limit_mbps": true, "folder": true, "tier": true},
	ProfileTrueNAS: {"size": true, "description": true, "deduplication": true, "compression": true, "sync": true, "volblocksize": true},
}

// readOnlyVolumeFields are ContainerVolume fields PUT ignores.
var readOnlyVolumeFields = map[string]bool{"id": true, "name": true, "published": true, "clone": true, "base_snapshot_id": true}

// editVolume is PUT /volumes/{id}: grow size, set description, set whitelisted config
// keys, move between volume groups ("" leaves the group). Nothing changes unless all of
// it is valid.
func (f *Fake) editVolume(q *request) reply {
	return withRecord(f, q, volumeRecord, func(v *volume) reply {
		r := fieldReader{body: q.body}
		description := r.str("description")
		config := r.object("config")
		groupID := r.str("volume_group_id")
		if problem := r.problem(); problem != "" {
			return f.badRequest("%s", problem)
		}
		size, sizeGiven, sizeOK := sizeField(q.body, "size")
		if !sizeOK {
			return f.badRequest("size must be a positive integer number of bytes")
		}
		if sizeGiven && size < v.size {
			return f.badRequest("volume size cannot be reduced from %d to %d", v.size, size)
		}
		for key := range config {
			if !mutableConfig[f.opts.Profile][key] {
				return f.badRequest("The request could not be understood by the server. Unexpected argument '%s'", key)
			}
		}
		_, groupGiven := q.body["volume_group_id"]
		if !f.truenas() { // truenas-csp reads only the keys it knows
			for key := range q.body {
				known := key == "size" || key == "description" || key == "config" || key == "volume_group_id"
				if !known && !readOnlyVolumeFields[key] {
					return f.badRequest("The request could not be understood by the server. Unexpected argument '%s'", key)
				}
			}
			if groupID != "" && f.volumeGroups[groupID] == nil {
				return f.notFound("volume group %s not found", groupID)
			}
		}
		if sizeGiven {
			v.size = size
		}
		if _, given := q.body["description"]; given {
			v.description = description
		}
		for key, value := range config {
			v.config[key] = value
		}
		if groupGiven && !f.truenas() {
			v.groupID = groupID
		}
		return ok(volumeToJSON(v))
	})
}

// deleteVolume is DELETE /volumes/{id}[?force=]. A published volume is refused (400 with
// a message that says so; truenas-csp answers 409) unless force=true, which unpublishes
// it first. Snapshots or clones depending on it are a 409 always.
func (f *Fake) deleteVolume(q *request) reply {
	return withDeletedRecord(f, q, volumeRecord, func(v *volume) reply {
		force := q.queryValue("force") == "true"
		if len(v.pubs) > 0 && !force {
			if f.truenas() {
				return cspError(http.StatusConflict, "Bad Request", "Cannot delete a published volume")
			}
			return f.badRequest("volume %s is published and cannot be deleted", v.name)
		}
		var hidden []string
		for _, s := range f.snapshots {
			if s.volumeID != v.id {
				continue
			}
			if f.hasClone(s.id) {
				return f.conflict("volume %s has clones that depend on its snapshot %s", v.name, s.name)
			}
			if !s.hidden {
				return f.conflict("volume %s has snapshots", v.name)
			}
			hidden = append(hidden, s.id)
		}
		for _, id := range hidden {
			delete(f.snapshots, id)
		}
		delete(f.volumes, v.id)
		return noContent()
	})
}

// hasClone reports whether a volume was cloned from the snapshot.
func (f *Fake) hasClone(snapshotID string) bool {
	for _, v := range f.volumes {
		if v.baseSnapshotID == snapshotID {
			return true
		}
	}
	return false
}
