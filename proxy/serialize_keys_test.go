package proxy

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestSerialKeyTable: every row names a unary method the gateway knows and singular string
// fields of its request.
func TestSerialKeyTable(t *testing.T) {
	methods := newMethodTable()
	for method, k := range serialKeys {
		info := methods[method]
		if info == nil {
			t.Errorf("%s: not a method the gateway knows", method)
			continue
		}
		if info.streaming() {
			t.Errorf("%s: a streaming method", method)
		}
		fields := info.desc.Input().Fields()
		for _, name := range []protoreflect.Name{k.field, k.scope} {
			if name == "" {
				continue
			}
			fd := fields.ByName(name)
			if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
				t.Errorf("%s: %s is not a string field of %s", method, name, info.desc.Input().FullName())
			}
		}
		if (k.scope == "") != (k.scopeLabel == "") {
			t.Errorf("%s: scope %q with label %q", method, k.scope, k.scopeLabel)
		}
		if !strings.HasSuffix(k.kind.prefix, ":") || k.kind.label == "" {
			t.Errorf("%s: kind %+v", method, k.kind)
		}
	}
}

// TestSerialReadsAreNotInTheTable: reads, capability and identity calls are never serialized.
func TestSerialReadsAreNotInTheTable(t *testing.T) {
	for _, method := range []string{
		"/csi.v1.Controller/ControllerGetVolume", "/csi.v1.Controller/ListVolumes", "/csi.v1.Controller/GetCapacity",
		"/csi.v1.Controller/ValidateVolumeCapabilities", "/csi.v1.Controller/ListSnapshots", "/csi.v1.Controller/GetSnapshot",
		"/csi.v1.Controller/ControllerGetCapabilities", "/csi.v1.Controller/ControllerGetVolumeHealth",
		"/csi.v1.Controller/ControllerListVolumeHealth", "/csi.v1.Node/NodeGetVolumeStats", "/csi.v1.Node/NodeGetInfo",
		"/csi.v1.Node/NodeGetCapabilities", "/csi.v1.Node/NodeGetVolumeHealth", "/csi.v1.Identity/Probe",
		"/csi.v1.GroupController/GetVolumeGroupSnapshot", "/volumegroup.Controller/ControllerGetVolumeGroup",
		"/volumegroup.Controller/ListVolumeGroups",
		"/csi.v1.SnapshotMetadata/GetMetadataAllocated", "/csi.v1.SnapshotMetadata/GetMetadataDelta",
	} {
		if _, ok := serialKeys[method]; ok {
			t.Errorf("%s is serialized", method)
		}
	}
}

// TestSerialOperationOf: the key and scope of a call, for every row of the table; and the calls
// that are not serialized.
func TestSerialOperationOf(t *testing.T) {
	methods := newMethodTable()
	for method, k := range serialKeys {
		t.Run(method, func(t *testing.T) {
			info := methods[method]
			m := info.input.New()
			m.Set(m.Descriptor().Fields().ByName(k.field), protoreflect.ValueOfString("obj-1"))
			if k.scope != "" {
				m.Set(m.Descriptor().Fields().ByName(k.scope), protoreflect.ValueOfString("at-1"))
			}
			raw, err := proto.Marshal(m.Interface())
			if err != nil {
				t.Fatal(err)
			}
			op, ok := operationOf(&Call{Method: method, Request: raw, info: info}, "")
			wantScope := ""
			if k.scope != "" {
				wantScope = "at-1"
			}
			if !ok || op.key != k.kind.prefix+"obj-1" || op.scope != wantScope || op.name != info.name {
				t.Errorf("operationOf = %+v, %v; want key %q scope %q", op, ok, k.kind.prefix+"obj-1", wantScope)
			}
		})
	}

	publish := &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1"}
	raw, _ := proto.Marshal(publish)
	empty, _ := proto.Marshal(&csi.DeleteVolumeRequest{})
	info := methods[mPublish]
	notSerialized := map[string]*Call{
		"unknown method":  {Method: "/example.v1.Storage/Wipe", Request: raw},
		"read":            {Method: "/csi.v1.Controller/ControllerGetVolume", Request: raw, info: methods["/csi.v1.Controller/ControllerGetVolume"]},
		"stream":          {Method: mPublish, Request: raw, info: info, Stream: &replayStream{}},
		"no request":      {Method: mPublish, info: info},
		"not decodable":   {Method: mPublish, Request: []byte{0xff, 0xff}, info: info},
		"empty volume_id": {Method: mDeleteVolume, Request: empty, info: methods[mDeleteVolume]},
	}
	for name, call := range notSerialized {
		if op, ok := operationOf(call, ""); ok {
			t.Errorf("%s: serialized as %+v", name, op)
		}
	}
}

// TestSerialOverlapsAndIdentical: attachments of one volume do not overlap each other,
// but overlap whole-volume operations; identical means same method and same request.
func TestSerialOverlapsAndIdentical(t *testing.T) {
	methods := newMethodTable()
	op := func(method string, m proto.Message) *operation {
		raw, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := operationOf(&Call{Method: method, Request: raw, info: methods[method]}, "")
		if !ok {
			t.Fatalf("%s not serialized", method)
		}
		return &o
	}
	pub1 := op(mPublish, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n1"})
	pub1again := op(mPublish, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n1"})
	pub1ro := op(mPublish, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n1", Readonly: true})
	pub2 := op(mPublish, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n2"})
	unpubAll := op("/csi.v1.Controller/ControllerUnpublishVolume", &csi.ControllerUnpublishVolumeRequest{VolumeId: "v"})
	del := op(mDeleteVolume, &csi.DeleteVolumeRequest{VolumeId: "v"})
	other := op(mDeleteVolume, &csi.DeleteVolumeRequest{VolumeId: "w"})
	byName := op(mCreateVolume, &csi.CreateVolumeRequest{Name: "v"})

	tests := []struct {
		a, b               *operation
		overlap, identical bool
	}{
		{pub1, pub1again, true, true},
		{pub1, pub1ro, true, false},
		{pub1, pub2, false, false},
		{pub1, unpubAll, true, false},
		{pub2, del, true, false},
		{del, other, false, false},
		{del, byName, false, false},
	}
	for i, tt := range tests {
		if got := tt.a.overlaps(tt.b); got != tt.overlap || tt.b.overlaps(tt.a) != got {
			t.Errorf("case %d: overlaps = %v, want %v", i, got, tt.overlap)
		}
		if got := tt.a.identical(tt.b); got != tt.identical {
			t.Errorf("case %d: identical = %v, want %v", i, got, tt.identical)
		}
	}
	if got := pub2.describe(); got != `ControllerPublishVolume (node "n2")` {
		t.Errorf("describe = %q", got)
	}
	if got := byName.object(); got != `volume name "v"` {
		t.Errorf("object = %q", got)
	}
}

// TestObjectKeyPerTenant: no two (tenant, kind, name or ID) triples share a key, whatever
// the ID looks like: a tenant's calls never meet another tenant's, nor a caller's of no
// tenant.
func TestObjectKeyPerTenant(t *testing.T) {
	kinds := []objectKind{kindVolumeName, kindVolume, kindSnapshotName, kindSnapshot, kindGroupSnapshotName,
		kindGroupSnapshot, kindVolumeGroupName, kindVolumeGroup}
	seen := map[string]string{}
	for _, tenant := range []string{"", "blue", "green", "volume", "volume-name", "blue-volume"} {
		for _, kind := range kinds {
			for _, id := range []string{"x", "blue/volume:x", "volume:x", "/x", ":x", "green.x"} {
				key, triple := objectKey(tenant, kind, id), tenant+" "+kind.prefix+" "+id
				if other, ok := seen[key]; ok {
					t.Errorf("%s and %s share the key %q", other, triple, key)
				}
				seen[key] = triple
			}
		}
	}
}
