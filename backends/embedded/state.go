package embedded

import (
	"encoding/json"
	"time"
)

// state is everything the appliance knows, as it is written to disk. It is only ever changed
// on a copy (see Appliance.commit), so a failed write leaves the live state untouched.
type state struct {
	// Seq numbers every record in creation order; listings page by it.
	Seq            int64                     `json:"seq"`
	Volumes        map[string]*volume        `json:"volumes"`
	Snapshots      map[string]*snapshot      `json:"snapshots"`
	Groups         map[string]*volumeGroup   `json:"volumeGroups"`
	GroupSnapshots map[string]*groupSnapshot `json:"groupSnapshots"`
}

// named is how a volume, a snapshot and a volume group begin: their ID, their name and their
// place in creation order (state.Seq when they were made). Its fields keep their JSON keys.
type named struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Seq  int64  `json:"seq"`
}

// newNamed names a record made now: a new ID with prefix, and the next sequence number.
func (s *state) newNamed(prefix, name string) named {
	return named{ID: newID(prefix), Name: name, Seq: s.nextSeq()}
}

func (n *named) sequence() int64    { return n.Seq }
func (n *named) recordName() string { return n.Name }

type volume struct {
	named
	CapacityBytes     int64             `json:"capacityBytes"`
	Parameters        map[string]string `json:"parameters,omitempty"`
	MutableParameters map[string]string `json:"mutableParameters,omitempty"`
	// SourceSnapshotID or SourceVolumeID name the content source, if any.
	SourceSnapshotID string `json:"sourceSnapshotId,omitempty"`
	SourceVolumeID   string `json:"sourceVolumeId,omitempty"`
	// Publications maps node ID to how the volume is published there.
	Publications map[string]publication `json:"publications,omitempty"`
	// GroupID is the csi-addons volume group the volume belongs to, if any.
	GroupID   string    `json:"groupId,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

type publication struct {
	AccessMode string `json:"accessMode"`
	Readonly   bool   `json:"readonly"`
}

type snapshot struct {
	named
	SourceVolumeID  string            `json:"sourceVolumeId"`
	SizeBytes       int64             `json:"sizeBytes"`
	GroupSnapshotID string            `json:"groupSnapshotId,omitempty"`
	Parameters      map[string]string `json:"parameters,omitempty"`
	CreatedAt       time.Time         `json:"createdAt"`
}

type volumeGroup struct {
	named
	Parameters map[string]string `json:"parameters,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
}

type groupSnapshot struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	SourceVolumeIDs []string  `json:"sourceVolumeIds"`
	SnapshotIDs     []string  `json:"snapshotIds"`
	CreatedAt       time.Time `json:"createdAt"`
}

func newState() *state {
	return &state{
		Volumes:        map[string]*volume{},
		Snapshots:      map[string]*snapshot{},
		Groups:         map[string]*volumeGroup{},
		GroupSnapshots: map[string]*groupSnapshot{},
	}
}

// clone returns a deep copy. The JSON round trip is the one place that knows every field, so
// a field added to a record can never be shared between the live state and its copy.
func (s *state) clone() *state {
	b, err := json.Marshal(s)
	if err != nil {
		panic("embedded: state does not marshal: " + err.Error()) // only plain data types above
	}
	c := newState()
	if err := json.Unmarshal(b, c); err != nil {
		panic("embedded: state does not unmarshal: " + err.Error())
	}
	c.fillMaps()
	return c
}

// fillMaps replaces nil maps (from an older or hand-edited file) by empty ones.
func (s *state) fillMaps() {
	if s.Volumes == nil {
		s.Volumes = map[string]*volume{}
	}
	if s.Snapshots == nil {
		s.Snapshots = map[string]*snapshot{}
	}
	if s.Groups == nil {
		s.Groups = map[string]*volumeGroup{}
	}
	if s.GroupSnapshots == nil {
		s.GroupSnapshots = map[string]*groupSnapshot{}
	}
}

func (s *state) nextSeq() int64 {
	s.Seq++
	return s.Seq
}

// byName returns the record of m named name (a create's name seen before), or nil.
func byName[T interface{ recordName() string }](m map[string]T, name string) T {
	for _, r := range m {
		if r.recordName() == name {
			return r
		}
	}
	var none T
	return none
}

func (gs *groupSnapshot) recordName() string { return gs.Name }

// usedBytes is the sum of all volume capacities.
func (s *state) usedBytes() int64 {
	var n int64
	for _, v := range s.Volumes {
		n += v.CapacityBytes
	}
	return n
}
