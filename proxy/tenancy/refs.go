package tenancy

import (
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Kind is a kind of backend object a tenant owns.
type Kind byte

// The kinds of objects tenancy scopes.
const (
	Volume Kind = iota + 1
	Snapshot
	GroupSnapshot
	VolumeGroup
)

func (k Kind) String() string {
	switch k {
	case Volume:
		return "volume"
	case Snapshot:
		return "snapshot"
	case GroupSnapshot:
		return "group snapshot"
	case VolumeGroup:
		return "volume group"
	}
	return "object"
}

// refFields are the fields, across CSI, GroupController, SnapshotMetadata and csi-addons
// VolumeGroup messages, that refer to an object by ID; a repeated field holds several.
var refFields = map[protoreflect.Name]Kind{
	"volume_id":          Volume,
	"volume_ids":         Volume,
	"source_volume_id":   Volume,
	"source_volume_ids":  Volume,
	"snapshot_id":        Snapshot,
	"snapshot_ids":       Snapshot,
	"base_snapshot_id":   Snapshot,
	"target_snapshot_id": Snapshot,
	"group_snapshot_id":  GroupSnapshot,
	"volume_group_id":    VolumeGroup,
}

// ref is one object reference found in a message.
type ref struct {
	kind  Kind
	field protoreflect.Name
	id    string
}

// rewriteRefs calls fn for every object reference in m, depth first in field order, and
// stores what fn returns in its place. It stops at the first error. Maps (volume_context,
// parameters, secrets) are not searched: their keys belong to the driver, not to CSI.
func rewriteRefs(m protoreflect.Message, fn func(ref) (string, error)) error {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() || !m.Has(fd) {
			continue
		}
		if err := rewriteField(m, fd, fn); err != nil {
			return err
		}
	}
	return nil
}

// rewriteField rewrites the references in one populated field of m.
func rewriteField(m protoreflect.Message, fd protoreflect.FieldDescriptor, fn func(ref) (string, error)) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		kind, ok := refFields[fd.Name()]
		if !ok {
			return nil
		}
		if !fd.IsList() {
			id, err := fn(ref{kind, fd.Name(), m.Get(fd).String()})
			if err == nil {
				m.Set(fd, protoreflect.ValueOfString(id))
			}
			return err
		}
		list := m.Mutable(fd).List()
		for i := range list.Len() {
			id, err := fn(ref{kind, fd.Name(), list.Get(i).String()})
			if err != nil {
				return err
			}
			list.Set(i, protoreflect.ValueOfString(id))
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if !fd.IsList() {
			return rewriteRefs(m.Mutable(fd).Message(), fn)
		}
		list := m.Mutable(fd).List()
		for i := range list.Len() {
			if err := rewriteRefs(list.Get(i).Message(), fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownRef returns the ID of the object a list entry describes: the shallowest reference to
// an object of kind in m (a ListVolumes entry's volume.volume_id, not the volume_id of its
// content source). ok is false when there is none.
func ownRef(m protoreflect.Message, kind Kind) (id string, ok bool) {
	level := []protoreflect.Message{m}
	for len(level) > 0 {
		var next []protoreflect.Message
		for _, m := range level {
			fields := m.Descriptor().Fields()
			for i := range fields.Len() {
				fd := fields.Get(i)
				if fd.IsMap() || !m.Has(fd) {
					continue
				}
				switch {
				case fd.Kind() == protoreflect.StringKind && !fd.IsList() && refFields[fd.Name()] == kind:
					return m.Get(fd).String(), true
				case fd.Kind() == protoreflect.MessageKind && fd.IsList():
					for j := range m.Get(fd).List().Len() {
						next = append(next, m.Get(fd).List().Get(j).Message())
					}
				case fd.Kind() == protoreflect.MessageKind:
					next = append(next, m.Get(fd).Message())
				}
			}
		}
		level = next
	}
	return "", false
}
