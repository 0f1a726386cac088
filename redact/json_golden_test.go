package redact

import (
	"bufio"
	"flag"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/replication"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/test/bench/messages"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/redact_json.golden from Redactor.JSON")

const jsonGolden = "testdata/redact_json.golden"

// goldenCase is one message of the golden corpus.
type goldenCase struct {
	name string
	msg  proto.Message
}

// goldenCorpus is a message of every shape Redactor.JSON writes: oneofs (set, and set to a
// nil message), nested and repeated messages (with a nil element), string maps and maps of
// other key and value kinds, well-known types, unknown fields, proto2 and proto3-optional
// presence, unknown enum numbers, odd floats and strings, empty messages. (Not Struct or
// Any: JSON hands those to protojson, whose spacing differs from build to build.)
func goldenCorpus(t *testing.T) []goldenCase {
	ts := timestamppb.New(time.Date(2026, 11, 22, 3, 4, 5, 120_000_000, time.UTC))
	block := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{}} // oneof set, message nil
	createProto := protodesc.ToDescriptorProto((&csi.CreateVolumeRequest{}).ProtoReflect().Descriptor())
	cases := []goldenCase{
		{"Probe", &csi.ProbeRequest{}},
		{"ProbeResponseFalse", &csi.ProbeResponse{Ready: wrapperspb.Bool(false)}},
		{"ProbeResponseTrue", &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}},
		{"BenchCreateVolume", messages.CreateVolumeRequest("pvc-1")},
		{"BenchCreateVolumeResponse", messages.CreateVolumeResponse("pvc-1")},
		{"BenchListVolumes", messages.ListVolumesResponse()},
		{"BenchNodePublishVolume", messages.NodePublishVolumeRequest("vol-1")},
		{"BenchGetMetadataAllocated", messages.GetMetadataAllocatedRequest("snap-1")},
		{"BenchGetMetadataAllocatedResponse", messages.GetMetadataAllocatedResponse(1)},
		{"CreateVolumeBlockAndMount", benchCreateVolume()},
		{"CreateVolumeFromSnapshot", &csi.CreateVolumeRequest{
			Name: "pvc-2", VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
				Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}},
			MutableParameters: map[string]string{"iops": "3000"}, Secrets: map[string]string{}}},
		{"CreateVolumeNilCapability", &csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{nil, mountCap()}}},
		{"VolumeCapabilityNilBlock", block},
		{"AccessModeUnknownEnum", &csi.VolumeCapability_AccessMode{Mode: 99}},
		{"GetCapacityResponse", &csi.GetCapacityResponse{AvailableCapacity: 1 << 40, MaximumVolumeSize: wrapperspb.Int64(1 << 41), MinimumVolumeSize: wrapperspb.Int64(0)}},
		{"ListSnapshots", &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: &csi.Snapshot{
			SnapshotId: "snap-\u2028\"quoted\"\\\t\x01\xff<&>", SourceVolumeId: "vol-é", CreationTime: ts, ReadyToUse: true, SizeBytes: -1}},
			{Snapshot: &csi.Snapshot{CreationTime: &timestamppb.Timestamp{}}}}}},
		{"PublishContextSafeKeys", &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"lun": "3", "chap": "s3cr3t-value", "<&>": "x", "": ""}}},
		{"NodeStageAllContexts", &csi.NodeStageVolumeRequest{VolumeId: "vol-1", PublishContext: map[string]string{"devicePath": "/dev/sda", "t": canary},
			StagingTargetPath: "/staging", VolumeCapability: mountCap(canary), Secrets: canarySecrets(), VolumeContext: map[string]string{"k": canary}}},
		{"UnknownFields", withUnknown(&csi.CreateVolumeRequest{Name: "pvc-1", Secrets: canarySecrets(),
			VolumeCapabilities: []*csi.VolumeCapability{withUnknown(mountCap("ro")).(*csi.VolumeCapability)}})},
		{"NodeGetInfo", &csi.NodeGetInfoResponse{NodeId: "node-1", MaxVolumesPerNode: 16, AccessibleTopology: withUnknown(&csi.Topology{}).(*csi.Topology)}},
		//lint:ignore SA1019 the golden corpus pins how a deprecated field (replication's volume_id) is written
		{"Addons", &replication.EnableVolumeReplicationRequest{VolumeId: "vol-1", ReplicationId: "r-1",
			Parameters: map[string]string{"mode": "sync"}, Secrets: canarySecrets()}},
		{"DescriptorProto2", createProto},
		{"Duration", durationpb.New(-1500 * time.Millisecond)},
		{"DurationWhole", durationpb.New(3 * time.Second)},
		{"Timestamp", ts},
		{"Empty", &emptypb.Empty{}},
		{"StringValueEmpty", wrapperspb.String("")},
		{"BytesValue", wrapperspb.Bytes([]byte("\x00\xffbytes"))},
		{"DoubleNaN", wrapperspb.Double(math.NaN())},
		{"FloatNegZero", wrapperspb.Float(float32(math.Copysign(0, -1)))},
		{"UInt64Max", wrapperspb.UInt64(math.MaxUint64)},
	}
	return append(cases, dynamicCorpus(t)...)
}

// dynamicCorpus returns dynamic messages of a run-time schema with what CSI does not have:
// maps with bool, integer and message values and non-string keys, explicit presence
// (proto3 optional), repeated numbers, floats and bytes, and a secret of each kind.
func dynamicCorpus(t *testing.T) []goldenCase {
	optional := func(f *descriptorpb.FieldDescriptorProto, oneof int32) *descriptorpb.FieldDescriptorProto {
		f.Proto3Optional, f.OneofIndex = proto.Bool(true), proto.Int32(oneof)
		return f
	}
	mapEntry := func(name string, key, value descriptorpb.FieldDescriptorProto_Type, valueType string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
			Field: []*descriptorpb.FieldDescriptorProto{field("key", 1, key, "", false, nil), field("value", 2, value, valueType, false, nil)}}
	}
	T := descriptorpb.FieldDescriptorProto_Type_value
	typ := func(name string) descriptorpb.FieldDescriptorProto_Type {
		return descriptorpb.FieldDescriptorProto_Type(T["TYPE_"+name])
	}
	secret := unknownOption(backends.CSISecretOption)
	file := buildFile(t, "test.golden", &descriptorpb.DescriptorProto{
		Name: proto.String("Kinds"),
		Field: []*descriptorpb.FieldDescriptorProto{
			field("f_double", 1, typ("DOUBLE"), "", false, nil),
			field("f_float", 2, typ("FLOAT"), "", false, nil),
			field("f_sint64", 3, typ("SINT64"), "", false, nil),
			field("f_fixed32", 4, typ("FIXED32"), "", false, nil),
			field("f_bytes", 5, typ("BYTES"), "", false, nil),
			field("f_ints", 6, typ("INT64"), "", true, nil),
			field("f_floats", 7, typ("FLOAT"), "", true, nil),
			optional(field("f_opt_string", 8, typ("STRING"), "", false, nil), 0),
			optional(field("f_opt_int", 9, typ("INT32"), "", false, nil), 1),
			field("by_int", 10, typ("MESSAGE"), ".test.golden.Kinds.ByIntEntry", true, nil),
			field("by_bool", 11, typ("MESSAGE"), ".test.golden.Kinds.ByBoolEntry", true, nil),
			field("secret_bytes", 12, typ("BYTES"), "", false, secret),
			field("secret_list", 13, typ("BYTES"), "", true, secret),
			field("secret_number", 14, typ("INT64"), "", false, secret),
			field("secret_map", 15, typ("MESSAGE"), ".test.golden.Kinds.SecretMapEntry", true, secret),
			field("secret_int_map", 16, typ("MESSAGE"), ".test.golden.Kinds.SecretIntMapEntry", true, secret),
			field("child", 17, typ("MESSAGE"), ".test.golden.Kinds", false, nil),
			field("volume_context", 18, typ("MESSAGE"), ".test.golden.Kinds.VolumeContextEntry", true, nil),
			field("f_uint64", 19, typ("UINT64"), "", false, nil),
			field("f_bools", 20, typ("BOOL"), "", true, nil),
		},
		OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: proto.String("_f_opt_string")}, {Name: proto.String("_f_opt_int")}},
		NestedType: []*descriptorpb.DescriptorProto{
			mapEntry("ByIntEntry", typ("SINT32"), typ("MESSAGE"), ".test.golden.Kinds"),
			mapEntry("ByBoolEntry", typ("BOOL"), typ("UINT32"), ""),
			mapEntry("SecretMapEntry", typ("STRING"), typ("STRING"), ""),
			mapEntry("SecretIntMapEntry", typ("BOOL"), typ("UINT32"), ""),
			mapEntry("VolumeContextEntry", typ("STRING"), typ("STRING"), ""),
		},
	})
	md := file.Messages().Get(0)
	fields := md.Fields()
	set := func(m *dynamicpb.Message, name string, v protoreflect.Value) {
		m.Set(fields.ByName(protoreflect.Name(name)), v)
	}
	list := func(m *dynamicpb.Message, name string, vs ...protoreflect.Value) {
		l := m.Mutable(fields.ByName(protoreflect.Name(name))).List()
		for _, v := range vs {
			l.Append(v)
		}
	}
	mapOf := func(m *dynamicpb.Message, name string, kvs ...protoreflect.Value) {
		mp := m.Mutable(fields.ByName(protoreflect.Name(name))).Map()
		for i := 0; i < len(kvs); i += 2 {
			mp.Set(kvs[i].MapKey(), kvs[i+1])
		}
	}
	empty := dynamicpb.NewMessage(md)
	full := dynamicpb.NewMessage(md)
	set(full, "f_double", protoreflect.ValueOfFloat64(math.Inf(-1)))
	set(full, "f_float", protoreflect.ValueOfFloat32(1.25))
	set(full, "f_sint64", protoreflect.ValueOfInt64(math.MinInt64))
	set(full, "f_fixed32", protoreflect.ValueOfUint32(math.MaxUint32))
	set(full, "f_bytes", protoreflect.ValueOfBytes([]byte{0, 1, 0xfe}))
	list(full, "f_ints", protoreflect.ValueOfInt64(-1), protoreflect.ValueOfInt64(0), protoreflect.ValueOfInt64(1<<53+1))
	list(full, "f_floats", protoreflect.ValueOfFloat32(float32(math.NaN())), protoreflect.ValueOfFloat32(1e-7))
	set(full, "f_opt_string", protoreflect.ValueOfString(""))
	set(full, "f_opt_int", protoreflect.ValueOfInt32(0))
	inner := dynamicpb.NewMessage(md)
	set(inner, "secret_bytes", protoreflect.ValueOfBytes([]byte(canary)))
	mapOf(full, "by_int", protoreflect.ValueOfInt32(-3), protoreflect.ValueOfMessage(inner),
		protoreflect.ValueOfInt32(2), protoreflect.ValueOfMessage(dynamicpb.NewMessage(md)),
		protoreflect.ValueOfInt32(10), protoreflect.ValueOfMessage(inner))
	mapOf(full, "by_bool", protoreflect.ValueOfBool(true), protoreflect.ValueOfUint32(7), protoreflect.ValueOfBool(false), protoreflect.ValueOfUint32(0))
	set(full, "secret_bytes", protoreflect.ValueOfBytes([]byte(canary)))
	list(full, "secret_list", protoreflect.ValueOfBytes([]byte(canary)), protoreflect.ValueOfBytes(nil))
	set(full, "secret_number", protoreflect.ValueOfInt64(42))
	mapOf(full, "secret_map", protoreflect.ValueOfString("b"), protoreflect.ValueOfString(canary), protoreflect.ValueOfString("a"), protoreflect.ValueOfString(""))
	mapOf(full, "secret_int_map", protoreflect.ValueOfBool(true), protoreflect.ValueOfUint32(7))
	set(full, "child", protoreflect.ValueOfMessage(inner))
	mapOf(full, "volume_context", protoreflect.ValueOfString("lun"), protoreflect.ValueOfString("0"), protoreflect.ValueOfString("chap"), protoreflect.ValueOfString(canary))
	set(full, "f_uint64", protoreflect.ValueOfUint64(math.MaxUint64))
	list(full, "f_bools", protoreflect.ValueOfBool(false), protoreflect.ValueOfBool(true))
	full.SetUnknown(withUnknown(&csi.ProbeRequest{}).ProtoReflect().GetUnknown())
	return []goldenCase{{"DynamicEmpty", empty}, {"DynamicFull", full}}
}

// TestRedactJSONGolden pins Redactor.JSON's output, byte for byte, on the golden corpus; and
// a dynamic message of a generated type must be written exactly as the generated one is.
// Run with -update to rewrite the golden file after an intended change of output.
func TestRedactJSONGolden(t *testing.T) {
	r := NewRedactor(WithSafeContextKeys("lun", "devicePath"))
	cases := goldenCorpus(t)
	if *updateGolden {
		var sb strings.Builder
		for _, c := range cases {
			sb.WriteString(c.name + "\t" + r.JSON(c.msg) + "\n")
		}
		if err := os.WriteFile(jsonGolden, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(jsonGolden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, line, _ := strings.Cut(sc.Text(), "\t")
		want[name] = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ok := want[c.name]
			if !ok {
				t.Fatalf("not in %s; run go test -run TestRedactJSONGolden -update", jsonGolden)
			}
			if got := r.JSON(c.msg); got != w {
				t.Errorf("JSON\n got  %s\n want %s", got, w)
			}
			if _, dynamic := c.msg.(*dynamicpb.Message); dynamic {
				return
			}
			wire, err := proto.Marshal(c.msg)
			if err != nil {
				return // a nil element in a list: no wire form to build a dynamic copy from
			}
			dyn := dynamicpb.NewMessage(c.msg.ProtoReflect().Descriptor())
			if err := proto.Unmarshal(wire, dyn); err != nil {
				t.Fatal(err)
			}
			if got := r.JSON(dyn); got != w {
				t.Errorf("JSON of a dynamic copy\n got  %s\n want %s", got, w)
			}
		})
	}
}
