package translate

import (
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Fields that cross as they are: a message's scalar, map and repeated scalar fields, and
// fields of a type both versions share (google.protobuf.BoolValue), keep their value under
// their name in the other version, or under the name renames gives. Fields whose types are
// the version's own messages or enums (capabilities, topology, content sources, snapshot
// status) are the converters' business, in the files named for them.

// renames are the fields v0 names differently, by the v1 message: v1 field → v0 field. The
// one table serves both directions.
var renames = map[protoreflect.Name]map[protoreflect.Name]protoreflect.Name{
	"CreateVolumeRequest":               {"secrets": "controller_create_secrets"},
	"DeleteVolumeRequest":               {"secrets": "controller_delete_secrets"},
	"ControllerPublishVolumeRequest":    {"secrets": "controller_publish_secrets", "volume_context": "volume_attributes"},
	"ControllerPublishVolumeResponse":   {"publish_context": "publish_info"},
	"ControllerUnpublishVolumeRequest":  {"secrets": "controller_unpublish_secrets"},
	"ValidateVolumeCapabilitiesRequest": {"volume_context": "volume_attributes"},
	"CreateSnapshotRequest":             {"secrets": "create_snapshot_secrets"},
	"DeleteSnapshotRequest":             {"secrets": "delete_snapshot_secrets"},
	"NodeStageVolumeRequest":            {"publish_context": "publish_info", "secrets": "node_stage_secrets", "volume_context": "volume_attributes"},
	"NodePublishVolumeRequest":          {"publish_context": "publish_info", "secrets": "node_publish_secrets", "volume_context": "volume_attributes"},
	"Volume":                            {"volume_id": "id", "volume_context": "attributes"},
	"Snapshot":                          {"snapshot_id": "id"},
}

// crossed returns a new T, the other version's counterpart of from, with the fields that
// cross as they are (crossFields); nil stays nil.
func crossed[T proto.Message](from proto.Message) T {
	var to T
	if !from.ProtoReflect().IsValid() {
		return to
	}
	to = to.ProtoReflect().Type().New().Interface().(T)
	crossFields(from, to)
	return to
}

// crossFields sets in to, a message of one version, the fields of from, its counterpart in
// the other, that cross as they are. Values are shared, not copied, as an assignment would.
func crossFields(from, to proto.Message) {
	src, dst := from.ProtoReflect(), to.ProtoReflect()
	for _, p := range crossingOf(src.Descriptor(), dst.Descriptor()) {
		if src.Has(p.from) {
			dst.Set(p.to, src.Get(p.from))
		}
	}
}

// crossing is a field of one message and its counterpart in the other version's.
type crossing struct{ from, to protoreflect.FieldDescriptor }

// crossings keeps, by pair of messages, the fields that cross as they are: worked out once
// per pair from the descriptors, which do not change.
var crossings sync.Map // [2]protoreflect.FullName → []crossing

// crossingOf returns the fields of dst that take the value of a field of src.
func crossingOf(src, dst protoreflect.MessageDescriptor) []crossing {
	key := [2]protoreflect.FullName{src.FullName(), dst.FullName()}
	if c, ok := crossings.Load(key); ok {
		return c.([]crossing)
	}
	v1Name, toV1 := src.Name(), dst.FullName().Parent() == v1Package
	if toV1 {
		v1Name = dst.Name()
	}
	var pairs []crossing
	fields := dst.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := fd.Name()
		if toV1 {
			if v0Field, ok := renames[v1Name][name]; ok {
				name = v0Field
			}
		} else {
			name = v1FieldOf(v1Name, name)
		}
		if sfd := src.Fields().ByName(name); sfd != nil && sameType(fd, sfd) {
			pairs = append(pairs, crossing{from: sfd, to: fd})
		}
	}
	crossings.Store(key, pairs)
	return pairs
}

// v1Package is the v1 messages' proto package.
const v1Package protoreflect.FullName = "csi.v1"

// v1FieldOf is the v1 field of message v1Name that v0 calls v0Field.
func v1FieldOf(v1Name, v0Field protoreflect.Name) protoreflect.Name {
	for v1Field, v0 := range renames[v1Name] {
		if v0 == v0Field {
			return v1Field
		}
	}
	return v0Field
}

// sameType reports whether a value of field b can be set in field a: the same kind and
// cardinality, and for a message or an enum (or a map's value) the same type, not merely
// one of the same name in the other version.
func sameType(a, b protoreflect.FieldDescriptor) bool {
	if a.IsMap() || b.IsMap() {
		return a.IsMap() && b.IsMap() && sameType(a.MapKey(), b.MapKey()) && sameType(a.MapValue(), b.MapValue())
	}
	if a.Kind() != b.Kind() || a.Cardinality() != b.Cardinality() {
		return false
	}
	switch a.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return a.Message().FullName() == b.Message().FullName()
	case protoreflect.EnumKind:
		return a.Enum().FullName() == b.Enum().FullName()
	}
	return true
}
