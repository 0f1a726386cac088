package proxy

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/internal/protoread"
)

// objectKind is a kind of object calls are serialized on: the prefix of its keys in the
// in-flight table, and how messages name it.
type objectKind struct {
	prefix, label string
}

var (
	kindVolumeName        = objectKind{"volume-name:", "volume name"}
	kindVolume            = objectKind{"volume:", "volume"}
	kindSnapshotName      = objectKind{"snapshot-name:", "snapshot name"}
	kindSnapshot          = objectKind{"snapshot:", "snapshot"}
	kindGroupSnapshotName = objectKind{"group-snapshot-name:", "group snapshot name"}
	kindGroupSnapshot     = objectKind{"group-snapshot:", "group snapshot"}
	kindVolumeGroupName   = objectKind{"volume-group-name:", "volume group name"}
	kindVolumeGroup       = objectKind{"volume-group:", "volume group"}
)

// serialKey says which request field names the object a method acts on (field) and, for a
// method that acts on one attachment of the object only, which field names the attachment
// (scope: the node of a ControllerPublish, the target path of a NodePublish).
type serialKey struct {
	kind       objectKind
	field      protoreflect.Name
	scope      protoreflect.Name
	scopeLabel string
}

// serialKeys lists every method that is serialized, by full method name, grouped by key. Methods not listed
// are never serialized: reads (ControllerGetVolume, ListVolumes, GetCapacity,
// ValidateVolumeCapabilities, NodeGetVolumeStats, GetSnapshot, GetVolumeGroupSnapshot, the
// health calls, ...), capability and identity calls, streams and methods the gateway does
// not know. A read changes nothing, so refusing it while a write is in flight protects
// nothing and only makes pollers retry.
//
// Publish and unpublish act on one attachment of a volume: a ControllerPublishVolume to
// node-2, or a NodeUnpublishVolume of another pod's target path, may run while one for
// node-1 or another target is in flight (the external-attacher and the kubelet issue those
// in parallel for multi-attach volumes). Every other call on the volume — and an unpublish
// with no node_id, which means every node — conflicts with all of them.
var serialKeys = keyTable([]struct {
	key     serialKey
	methods []string
}{
	// CSI v0's methods are the same operations under v0's names, in the same key space (a v0
	// and a v1 call on one volume are one volume's operations).
	{serialKey{kind: kindVolumeName, field: "name"}, []string{"/csi.v1.Controller/CreateVolume", "/csi.v0.Controller/CreateVolume"}},
	{serialKey{kind: kindVolume, field: "volume_id"}, []string{
		"/csi.v1.Controller/DeleteVolume", "/csi.v1.Controller/ControllerExpandVolume", "/csi.v1.Controller/ControllerModifyVolume",
		"/csi.v1.Node/NodeStageVolume", "/csi.v1.Node/NodeUnstageVolume", "/csi.v1.Node/NodeExpandVolume",
		"/csi.v0.Controller/DeleteVolume", "/csi.v0.Node/NodeStageVolume", "/csi.v0.Node/NodeUnstageVolume",
	}},
	{serialKey{kind: kindVolume, field: "volume_id", scope: "node_id", scopeLabel: "node"}, []string{
		"/csi.v1.Controller/ControllerPublishVolume", "/csi.v1.Controller/ControllerUnpublishVolume",
		"/csi.v0.Controller/ControllerPublishVolume", "/csi.v0.Controller/ControllerUnpublishVolume",
	}},
	{serialKey{kind: kindVolume, field: "volume_id", scope: "target_path", scopeLabel: "target path"}, []string{
		"/csi.v1.Node/NodePublishVolume", "/csi.v1.Node/NodeUnpublishVolume",
		"/csi.v0.Node/NodePublishVolume", "/csi.v0.Node/NodeUnpublishVolume",
	}},
	{serialKey{kind: kindSnapshotName, field: "name"}, []string{"/csi.v1.Controller/CreateSnapshot", "/csi.v0.Controller/CreateSnapshot"}},
	{serialKey{kind: kindSnapshot, field: "snapshot_id"}, []string{"/csi.v1.Controller/DeleteSnapshot", "/csi.v0.Controller/DeleteSnapshot"}},
	{serialKey{kind: kindGroupSnapshotName, field: "name"}, []string{"/csi.v1.GroupController/CreateVolumeGroupSnapshot"}},
	{serialKey{kind: kindGroupSnapshot, field: "group_snapshot_id"}, []string{"/csi.v1.GroupController/DeleteVolumeGroupSnapshot"}},
	{serialKey{kind: kindVolumeGroupName, field: "name"}, []string{"/volumegroup.Controller/CreateVolumeGroup"}},
	{serialKey{kind: kindVolumeGroup, field: "volume_group_id"}, []string{
		"/volumegroup.Controller/ModifyVolumeGroupMembership", "/volumegroup.Controller/DeleteVolumeGroup",
	}},
})

// keyTable indexes the methods of each key by full method name.
func keyTable(keys []struct {
	key     serialKey
	methods []string
}) map[string]serialKey {
	t := map[string]serialKey{}
	for _, k := range keys {
		for _, m := range k.methods {
			t[m] = k.key
		}
	}
	return t
}

// operation is one serialized call as the in-flight table sees it.
type operation struct {
	key   string // objectKey: the caller's tenant, kind prefix and object id or name
	scope string // the attachment it acts on; "" for the whole object
	kind  objectKind
	id    string
	// scopeLabel names the scope field in messages ("node", "target path").
	scopeLabel string

	method string // full method name
	name   string // short method name, for messages
	call   *Call  // the call that performs it: its raw request, decoded only if needed
}

// operationOf returns the operation a call of tenant ("" for a caller of no tenant) performs,
// or false when the call is not serialized: a method not in serialKeys, a stream, a request
// that is not protobuf wire format (the backend will say what is wrong with it) or one that
// leaves the key field empty. It reads the key fields off the wire: a call that nothing else
// decodes is not decoded.
func operationOf(call *Call, tenant string) (operation, bool) {
	if call.info == nil || call.Stream != nil || call.Request == nil {
		return operation{}, false
	}
	k, ok := serialKeys[call.Method]
	if !ok {
		return operation{}, false
	}
	fields := call.info.desc.Input().Fields()
	fds := [2]protoreflect.FieldDescriptor{fields.ByName(k.field)}
	if k.scope != "" {
		fds[1] = fields.ByName(k.scope)
	}
	var values [2]string
	if !protoread.WireStrings(call.Request, fds[:], values[:]) || values[0] == "" {
		return operation{}, false
	}
	op := operation{key: objectKey(tenant, k.kind, values[0]), kind: k.kind, id: values[0],
		method: call.Method, name: call.info.name, call: call}
	if k.scope != "" {
		op.scope, op.scopeLabel = values[1], k.scopeLabel
	}
	return op, true
}

// objectKey is the in-flight table's key of an object: its kind and its name or ID as the
// caller sent them, qualified by the caller's tenant. A tenant's names and IDs are its own
// (the tenancy stage, after serialization, turns them into the backend's), so two tenants'
// calls must never meet: "pvc-1" of tenant a and "pvc-1" of tenant b are two volumes, and
// joining their creates would hand one tenant the other's volume. Tenant names cannot
// contain '/' or ':', and every kind prefix ends in ':', so no key is another's.
func objectKey(tenant string, kind objectKind, id string) string {
	if tenant == "" {
		return kind.prefix + id
	}
	return tenant + "/" + kind.prefix + id
}

// object names the object in messages: `volume "vol-1"`.
func (op *operation) object() string { return fmt.Sprintf("%s %q", op.kind.label, op.id) }

// describe names the operation in messages: `ControllerPublishVolume (node "node-1")`.
func (op *operation) describe() string {
	if op.scope == "" {
		return op.name
	}
	return fmt.Sprintf("%s (%s %q)", op.name, op.scopeLabel, op.scope)
}

// overlaps reports whether op and other act on the same object, or the same attachment of it.
func (op *operation) overlaps(other *operation) bool {
	return op.key == other.key && (op.scope == "" || other.scope == "" || op.scope == other.scope)
}

// identical reports whether other is the same request as op, to be joined rather than
// refused. Byte equality is the fast path; proto.Equal catches the same request encoded
// differently — Go's protobuf encoder writes map entries (parameters, secrets, contexts) in
// random order, so a CO's retry of the same call is often not byte-identical.
func (op *operation) identical(other *operation) bool {
	if op.method != other.method {
		return false
	}
	if bytes.Equal(op.call.Request, other.call.Request) {
		return true
	}
	a, errA := op.call.DecodedRequest()
	b, errB := other.call.DecodedRequest()
	return errA == nil && errB == nil && proto.Equal(a, b)
}
