package redact

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/encryptionkeyrotation"
	"github.com/csi-addons/spec/lib/go/fence"
	"github.com/csi-addons/spec/lib/go/identity"
	"github.com/csi-addons/spec/lib/go/reclaimspace"
	"github.com/csi-addons/spec/lib/go/replication"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

const canary = "CANARY-7f3a9c-SECRET"

func canarySecrets() map[string]string {
	return map[string]string{"password": canary, "username": "admin"}
}

func mountCap(flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// allMessages calls f for every message declared in mds, nested ones included, except the
// synthetic map entries.
func allMessages(mds protoreflect.MessageDescriptors, f func(protoreflect.MessageDescriptor)) {
	for i := 0; i < mds.Len(); i++ {
		md := mds.Get(i)
		if md.IsMapEntry() {
			continue
		}
		f(md)
		allMessages(md.Messages(), f)
	}
}

// markedSecretFields returns the full names of the fields of file carrying csi.v1.csi_secret.
func markedSecretFields(file protoreflect.FileDescriptor) []string {
	var out []string
	allMessages(file.Messages(), func(md protoreflect.MessageDescriptor) {
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			if v, _ := proto.GetExtension(fd.Options(), csi.E_CsiSecret).(bool); v {
				out = append(out, string(fd.FullName()))
			}
		}
	})
	slices.Sort(out)
	return out
}

// planRedactsAll reports whether the compiled plan of fd's message treats fd as secret.
func planRedactsAll(r *Redactor, fd protoreflect.FieldDescriptor) bool {
	for _, s := range r.planFor(fd.ContainingMessage()).steps {
		if s.fd == fd {
			return s.act == redactAll
		}
	}
	return false
}

func TestRedactCSISecretFields(t *testing.T) {
	// Every csi_secret field of CSI v1.13 (DESIGN §7 says 22), by walking csi.proto.
	want := []string{
		"csi.v1.ControllerExpandVolumeRequest.secrets",
		"csi.v1.ControllerGetVolumeHealthRequest.secrets",
		"csi.v1.ControllerListVolumeHealthRequest.secrets",
		"csi.v1.ControllerModifyVolumeRequest.secrets",
		"csi.v1.ControllerPublishVolumeRequest.secrets",
		"csi.v1.ControllerUnpublishVolumeRequest.secrets",
		"csi.v1.CreateSnapshotRequest.secrets",
		"csi.v1.CreateVolumeGroupSnapshotRequest.secrets",
		"csi.v1.CreateVolumeRequest.secrets",
		"csi.v1.DeleteSnapshotRequest.secrets",
		"csi.v1.DeleteVolumeGroupSnapshotRequest.secrets",
		"csi.v1.DeleteVolumeRequest.secrets",
		"csi.v1.GetMetadataAllocatedRequest.secrets",
		"csi.v1.GetMetadataDeltaRequest.secrets",
		"csi.v1.GetSnapshotRequest.secrets",
		"csi.v1.GetVolumeGroupSnapshotRequest.secrets",
		"csi.v1.ListSnapshotsRequest.secrets",
		"csi.v1.NodeExpandVolumeRequest.secrets",
		"csi.v1.NodeGetStorageHealthRequest.secrets",
		"csi.v1.NodePublishVolumeRequest.secrets",
		"csi.v1.NodeStageVolumeRequest.secrets",
		"csi.v1.ValidateVolumeCapabilitiesRequest.secrets",
	}
	got := markedSecretFields(csi.File_csi_proto)
	if len(got) != 22 || !slices.Equal(got, want) {
		t.Fatalf("csi_secret fields in csi.proto: got %d\n%s\nwant %d\n%s",
			len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}

func TestRedactAddonsSecretFields(t *testing.T) {
	// The csi-addons protos reuse csi.v1.csi_secret; their descriptors carry it as a resolved
	// extension because their Go packages import the csi package.
	got := markedSecretFields(volumegroup.File_volumegroup_volumegroup_proto)
	want := []string{
		"volumegroup.ControllerGetVolumeGroupRequest.secrets",
		"volumegroup.CreateVolumeGroupRequest.secrets",
		"volumegroup.DeleteVolumeGroupRequest.secrets",
		"volumegroup.ListVolumeGroupsRequest.secrets",
		"volumegroup.ModifyVolumeGroupMembershipRequest.secrets",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("csi_secret fields in volumegroup.proto: got %v, want %v", got, want)
	}
}

// TestRedactEverySecretsField checks, for every message of CSI and csi-addons, that a field
// named "secrets" is one the Redactor treats as secret (a cross-check of option and name), and
// that a canary put into it does not survive Redact.
func TestRedactEverySecretsField(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		csi.File_csi_proto,
		volumegroup.File_volumegroup_volumegroup_proto,
		replication.File_replication_replication_proto,
		fence.File_fence_fence_proto,
		reclaimspace.File_reclaimspace_reclaimspace_proto,
		encryptionkeyrotation.File_encryptionkeyrotation_encryptionkeyrotation_proto,
		identity.File_identity_identity_proto,
	}
	r := NewRedactor()
	n := 0
	for _, file := range files {
		allMessages(file.Messages(), func(md protoreflect.MessageDescriptor) {
			fd := md.Fields().ByName("secrets")
			if fd == nil {
				return
			}
			n++
			t.Run(string(md.FullName()), func(t *testing.T) {
				if !planRedactsAll(r, fd) {
					t.Fatalf("%s is not treated as secret", fd.FullName())
				}
				mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
				if err != nil {
					t.Fatal(err)
				}
				m := mt.New()
				m.Mutable(fd).Map().Set(protoreflect.ValueOfString("key").MapKey(), protoreflect.ValueOfString(canary))
				assertNoCanary(t, r.Redact(m.Interface()))
				if got := r.SecretValues(m.Interface()); !slices.Equal(got, []string{canary}) {
					t.Errorf("SecretValues = %q, want the canary", got)
				}
			})
		})
	}
	if n < 22+5 {
		t.Errorf("found %d secrets fields, want at least 27 (CSI and volumegroup)", n)
	}
}

// assertNoCanary fails t if the canary appears in any rendering of m.
func assertNoCanary(t *testing.T, m proto.Message) {
	t.Helper()
	js, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	wire, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{
		"protojson":  string(js),
		"prototext":  prototext.Format(m),
		"wire":       string(wire),
		"fmt.Sprint": fmt.Sprint(m),
		"%+v":        fmt.Sprintf("%+v", m),
	} {
		if strings.Contains(out, canary) {
			t.Errorf("canary in %s of the redacted message: %s", name, out)
		}
	}
}

func TestRedactRequests(t *testing.T) {
	ctx := map[string]string{"chap-password": canary}
	tests := []struct {
		name string
		req  proto.Message
	}{
		{"CreateVolume", &csi.CreateVolumeRequest{
			Name:               "pvc-1",
			CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 30},
			VolumeCapabilities: []*csi.VolumeCapability{mountCap("noatime", canary), blockCap()},
			Parameters:         map[string]string{"type": "ssd"},
			Secrets:            canarySecrets(),
		}},
		{"DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: canarySecrets()}},
		{"ControllerPublishVolume", &csi.ControllerPublishVolumeRequest{
			VolumeId: "vol-1", NodeId: "node-1", VolumeCapability: mountCap(canary),
			Secrets: canarySecrets(), VolumeContext: ctx,
		}},
		{"ControllerUnpublishVolume", &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", Secrets: canarySecrets()}},
		{"ValidateVolumeCapabilities", &csi.ValidateVolumeCapabilitiesRequest{
			VolumeId: "vol-1", VolumeContext: ctx, VolumeCapabilities: []*csi.VolumeCapability{mountCap(canary)},
			Secrets: canarySecrets(),
		}},
		{"ControllerListVolumeHealth", &csi.ControllerListVolumeHealthRequest{Secrets: canarySecrets()}},
		{"ControllerGetVolumeHealth", &csi.ControllerGetVolumeHealthRequest{VolumeId: "vol-1", Secrets: canarySecrets()}},
		{"ControllerModifyVolume", &csi.ControllerModifyVolumeRequest{
			VolumeId: "vol-1", Secrets: canarySecrets(), MutableParameters: map[string]string{"iops": "3000"},
		}},
		{"CreateSnapshot", &csi.CreateSnapshotRequest{SourceVolumeId: "vol-1", Name: "snap-1", Secrets: canarySecrets()}},
		{"DeleteSnapshot", &csi.DeleteSnapshotRequest{SnapshotId: "snap-1", Secrets: canarySecrets()}},
		{"ListSnapshots", &csi.ListSnapshotsRequest{SourceVolumeId: "vol-1", Secrets: canarySecrets()}},
		{"GetSnapshot", &csi.GetSnapshotRequest{SnapshotId: "snap-1", Secrets: canarySecrets()}},
		{"ControllerExpandVolume", &csi.ControllerExpandVolumeRequest{
			VolumeId: "vol-1", VolumeCapability: mountCap(canary), Secrets: canarySecrets(),
		}},
		{"NodeStageVolume", &csi.NodeStageVolumeRequest{
			VolumeId: "vol-1", StagingTargetPath: "/staging", VolumeCapability: mountCap(canary),
			PublishContext: ctx, VolumeContext: ctx, Secrets: canarySecrets(),
		}},
		{"NodePublishVolume", &csi.NodePublishVolumeRequest{
			VolumeId: "vol-1", TargetPath: "/target", VolumeCapability: mountCap(canary),
			PublishContext: ctx, VolumeContext: ctx, Secrets: canarySecrets(),
		}},
		{"NodeGetStorageHealth", &csi.NodeGetStorageHealthRequest{Secrets: canarySecrets()}},
		{"NodeExpandVolume", &csi.NodeExpandVolumeRequest{
			VolumeId: "vol-1", VolumePath: "/target", VolumeCapability: mountCap(canary), Secrets: canarySecrets(),
		}},
		{"CreateVolumeGroupSnapshot", &csi.CreateVolumeGroupSnapshotRequest{
			Name: "group-1", SourceVolumeIds: []string{"vol-1"}, Secrets: canarySecrets(),
		}},
		{"DeleteVolumeGroupSnapshot", &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g-1", Secrets: canarySecrets()}},
		{"GetVolumeGroupSnapshot", &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "g-1", Secrets: canarySecrets()}},
		{"GetMetadataAllocated", &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1", Secrets: canarySecrets()}},
		{"GetMetadataDelta", &csi.GetMetadataDeltaRequest{
			BaseSnapshotId: "snap-1", TargetSnapshotId: "snap-2", Secrets: canarySecrets(),
		}},
		{"CreateVolumeGroup", &volumegroup.CreateVolumeGroupRequest{
			Name: "vg-1", Parameters: map[string]string{"pool": "a"}, Secrets: canarySecrets(), VolumeIds: []string{"vol-1"},
		}},
		{"DeleteVolumeGroup", &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: "vg-1", Secrets: canarySecrets()}},
		{"ModifyVolumeGroupMembership", &volumegroup.ModifyVolumeGroupMembershipRequest{
			VolumeGroupId: "vg-1", VolumeIds: []string{"vol-1"}, Secrets: canarySecrets(),
		}},
		{"ControllerGetVolumeGroup", &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: "vg-1", Secrets: canarySecrets()}},
		{"ListVolumeGroups", &volumegroup.ListVolumeGroupsRequest{Secrets: canarySecrets()}},
	}
	r := NewRedactor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := proto.Clone(tt.req)
			out := r.Redact(tt.req)
			assertNoCanary(t, out)
			if js := protojson.Format(out); !strings.Contains(js, RedactedValue) {
				t.Errorf("no %q in %s", RedactedValue, js)
			}
			if !proto.Equal(tt.req, orig) {
				t.Errorf("Redact modified its input:\n got %v\nwant %v", tt.req, orig)
			}
			if got := r.SecretValues(tt.req); !slices.Contains(got, canary) || !slices.Contains(got, "admin") {
				t.Errorf("SecretValues = %q, want the canary and %q", got, "admin")
			}
		})
	}
}

func TestRedactExact(t *testing.T) {
	tests := []struct {
		name       string
		opts       []Option
		in         proto.Message
		want       proto.Message
		wantValues []string
	}{
		{
			name: "secrets map keeps keys, replaces values",
			in:   &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"password": canary, "empty": ""}},
			want: &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"password": RedactedValue, "empty": RedactedValue}},
			// Empty values are not secret values; duplicates collapse.
			wantValues: []string{canary},
		},
		{
			name: "mount flags nested in the capabilities of CreateVolume",
			in: &csi.CreateVolumeRequest{
				Name:               "pvc-1",
				VolumeCapabilities: []*csi.VolumeCapability{blockCap(), mountCap("noatime", canary)},
				Parameters:         map[string]string{"type": "ssd"},
				Secrets:            map[string]string{"password": canary},
			},
			want: &csi.CreateVolumeRequest{
				Name:               "pvc-1",
				VolumeCapabilities: []*csi.VolumeCapability{blockCap(), mountCap(RedactedValue, RedactedValue)},
				Parameters:         map[string]string{"type": "ssd"},
				Secrets:            map[string]string{"password": RedactedValue},
			},
			wantValues: []string{canary, "noatime"},
		},
		{
			name: "context values redacted unless safe",
			opts: []Option{WithSafeContextKeys("lun", "csi.storage.k8s.io/pod.name")},
			in: &csi.NodeStageVolumeRequest{
				VolumeId:       "vol-1",
				PublishContext: map[string]string{"lun": "3", "chap-password": canary},
				VolumeContext:  map[string]string{"csi.storage.k8s.io/pod.name": "web-0", "token": "tok-123456", "fs": "ext4"},
			},
			want: &csi.NodeStageVolumeRequest{
				VolumeId:       "vol-1",
				PublishContext: map[string]string{"lun": "3", "chap-password": RedactedValue},
				VolumeContext:  map[string]string{"csi.storage.k8s.io/pod.name": "web-0", "token": RedactedValue, "fs": RedactedValue},
			},
			// Short context values are redacted by schema but not returned for scrubbing.
			wantValues: []string{canary, "tok-123456"},
		},
		{
			name: "context values all redacted by default",
			in: &csi.NodePublishVolumeRequest{
				VolumeId:       "vol-1",
				PublishContext: map[string]string{"lun": "3"},
				VolumeContext:  map[string]string{"csi.storage.k8s.io/pod.name": "web-0"},
			},
			want: &csi.NodePublishVolumeRequest{
				VolumeId:       "vol-1",
				PublishContext: map[string]string{"lun": RedactedValue},
				VolumeContext:  map[string]string{"csi.storage.k8s.io/pod.name": RedactedValue},
			},
			wantValues: nil, // all shorter than minContextScrubLen
		},
		{
			name:       "volume context in a response",
			in:         &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", VolumeContext: map[string]string{"k": canary}}},
			want:       &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", VolumeContext: map[string]string{"k": RedactedValue}}},
			wantValues: []string{canary},
		},
		{
			name: "volume context in a repeated message",
			in: &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{
				{Volume: &csi.Volume{VolumeId: "vol-1"}},
				{Volume: &csi.Volume{VolumeId: "vol-2", VolumeContext: map[string]string{"k": canary}}},
			}},
			want: &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{
				{Volume: &csi.Volume{VolumeId: "vol-1"}},
				{Volume: &csi.Volume{VolumeId: "vol-2", VolumeContext: map[string]string{"k": RedactedValue}}},
			}},
			wantValues: []string{canary},
		},
		{
			name:       "publish context in a response",
			in:         &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"chap": canary}},
			want:       &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"chap": RedactedValue}},
			wantValues: []string{canary},
		},
		{
			name: "volume group context and member volumes",
			in: &volumegroup.CreateVolumeGroupResponse{VolumeGroup: &volumegroup.VolumeGroup{
				VolumeGroupId:      "vg-1",
				VolumeGroupContext: map[string]string{"k": canary},
				Volumes:            []*csi.Volume{{VolumeId: "vol-1", VolumeContext: map[string]string{"k": canary}}},
			}},
			want: &volumegroup.CreateVolumeGroupResponse{VolumeGroup: &volumegroup.VolumeGroup{
				VolumeGroupId:      "vg-1",
				VolumeGroupContext: map[string]string{"k": RedactedValue},
				Volumes:            []*csi.Volume{{VolumeId: "vol-1", VolumeContext: map[string]string{"k": RedactedValue}}},
			}},
			wantValues: []string{canary},
		},
		{
			name:       "extra secret field by name",
			opts:       []Option{WithSecretFields("csi.v1.CreateVolumeRequest.parameters")},
			in:         &csi.CreateVolumeRequest{Name: "pvc-1", Parameters: map[string]string{"pw": canary}},
			want:       &csi.CreateVolumeRequest{Name: "pvc-1", Parameters: map[string]string{"pw": RedactedValue}},
			wantValues: []string{canary},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRedactor(tt.opts...)
			orig := proto.Clone(tt.in)
			if got := r.Redact(tt.in); !proto.Equal(got, tt.want) {
				t.Errorf("Redact:\n got %v\nwant %v", got, tt.want)
			}
			if got := r.SecretValues(tt.in); !slices.Equal(got, tt.wantValues) {
				t.Errorf("SecretValues = %q, want %q", got, tt.wantValues)
			}
			if !proto.Equal(tt.in, orig) {
				t.Errorf("input modified")
			}
		})
	}
}

func TestRedactNoSecrets(t *testing.T) {
	tests := []proto.Message{
		// ListVolumes carries no secrets in v1.13.
		&csi.ListVolumesRequest{MaxEntries: 10, StartingToken: "t"},
		&csi.GetCapacityRequest{VolumeCapabilities: []*csi.VolumeCapability{mountCap()}, Parameters: map[string]string{"a": "b"}},
		&csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging"},
		&csi.NodeGetInfoResponse{NodeId: "n", AccessibleTopology: &csi.Topology{Segments: map[string]string{"zone": "a"}}},
		&csi.ProbeResponse{Ready: wrapperspb.Bool(true)},
		&csi.GetPluginInfoResponse{Name: "x", Manifest: map[string]string{"k": "v"}},
		&csi.CreateVolumeRequest{Name: "pvc-1"},
	}
	r := NewRedactor()
	for _, in := range tests {
		t.Run(string(in.ProtoReflect().Descriptor().Name()), func(t *testing.T) {
			out := r.Redact(in)
			if out == in {
				t.Fatal("Redact returned its input, not a copy")
			}
			if !proto.Equal(out, in) {
				t.Errorf("Redact changed a message without secrets:\n got %v\nwant %v", out, in)
			}
			if got := r.SecretValues(in); got != nil {
				t.Errorf("SecretValues = %q, want nil", got)
			}
		})
	}
}

func withUnknown(m proto.Message) proto.Message {
	b := protowire.AppendTag(nil, 999, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendString(b, canary))
	return m
}

func TestRedactDropsUnknownFields(t *testing.T) {
	tests := []proto.Message{
		withUnknown(&csi.ListVolumesRequest{MaxEntries: 1}),
		withUnknown(&csi.CreateVolumeRequest{Name: "pvc-1", Secrets: canarySecrets()}),
		&csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{
			withUnknown(mountCap()).(*csi.VolumeCapability),
		}},
		&csi.NodeGetInfoResponse{AccessibleTopology: withUnknown(&csi.Topology{}).(*csi.Topology)},
	}
	r := NewRedactor()
	for _, in := range tests {
		t.Run(string(in.ProtoReflect().Descriptor().Name()), func(t *testing.T) {
			deterministic := proto.MarshalOptions{Deterministic: true} // map order varies otherwise
			wire, _ := deterministic.Marshal(in)
			out := r.Redact(in)
			assertNoCanary(t, out)
			if after, _ := deterministic.Marshal(in); string(after) != string(wire) {
				t.Error("Redact modified its input")
			}
		})
	}
}

func TestRedactNil(t *testing.T) {
	r := NewRedactor()
	if r.Redact(nil) != nil || r.SecretValues(nil) != nil {
		t.Error("nil message not handled")
	}
	var typed *csi.CreateVolumeRequest
	if out := r.Redact(typed); out.ProtoReflect().IsValid() {
		t.Errorf("Redact(typed nil) = %v", out)
	}
	if r.SecretValues(typed) != nil {
		t.Error("SecretValues(typed nil) not nil")
	}
}

func TestRedactDynamicMessage(t *testing.T) {
	md := (&csi.NodeStageVolumeRequest{}).ProtoReflect().Descriptor()
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(testutil.MustMarshal(t, &csi.NodeStageVolumeRequest{
		VolumeId: "vol-1", VolumeCapability: mountCap(canary), Secrets: canarySecrets(), VolumeContext: map[string]string{"k": canary},
	}), m); err != nil {
		t.Fatal(err)
	}
	r := NewRedactor()
	assertNoCanary(t, r.Redact(m))
	if got := r.SecretValues(m); !slices.Equal(got, []string{canary, "admin"}) {
		t.Errorf("SecretValues = %q", got)
	}
}

// unknownOption returns FieldOptions holding option number num = true as unknown bytes, as a
// descriptor decoded without the extension registered would.
func unknownOption(num protowire.Number) *descriptorpb.FieldOptions {
	o := &descriptorpb.FieldOptions{}
	o.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), 1))
	return o
}

// buildFile builds a run-time descriptor (not registered anywhere) for package pkg.
func buildFile(t *testing.T, pkg string, msgs ...*descriptorpb.DescriptorProto) protoreflect.FileDescriptor {
	t.Helper()
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:        proto.String(strings.ReplaceAll(pkg, ".", "/") + "/test.proto"),
		Package:     proto.String(pkg),
		Syntax:      proto.String("proto3"),
		MessageType: msgs,
	}, new(protoregistry.Files))
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func field(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, typeName string, repeated bool, opts *descriptorpb.FieldOptions) *descriptorpb.FieldDescriptorProto {
	label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	if repeated {
		label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	}
	f := &descriptorpb.FieldDescriptorProto{
		Name: proto.String(name), Number: proto.Int32(num), Type: typ.Enum(), Label: label.Enum(), Options: opts,
	}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	return f
}

func TestRedactRuntimeDescriptor(t *testing.T) {
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING
	// Same full name as the generated csi.v1.CreateVolumeRequest but another schema: the plan
	// cached for the generated type must not be used for it.
	file := buildFile(t, "csi.v1", &descriptorpb.DescriptorProto{
		Name: proto.String("CreateVolumeRequest"),
		Field: []*descriptorpb.FieldDescriptorProto{
			field("name", 1, str, "", false, nil),
			field("token", 2, str, "", false, unknownOption(backends.CSISecretOption)),
			field("group_token", 3, str, "", true, unknownOption(backends.VGCSISecretOption)),
		},
	})
	r := NewRedactor()
	r.Redact(&csi.CreateVolumeRequest{Name: "cache the generated type first"})

	m := dynamicpb.NewMessage(file.Messages().Get(0))
	fields := m.Descriptor().Fields()
	m.Set(fields.ByName("name"), protoreflect.ValueOfString("pvc-1"))
	m.Set(fields.ByName("token"), protoreflect.ValueOfString(canary))
	l := m.Mutable(fields.ByName("group_token")).List()
	l.Append(protoreflect.ValueOfString(canary))
	l.Append(protoreflect.ValueOfString("other-secret"))

	out := r.Redact(m).ProtoReflect()
	assertNoCanary(t, out.Interface())
	if got := out.Get(fields.ByName("name")).String(); got != "pvc-1" {
		t.Errorf("name = %q, want kept", got)
	}
	if got := out.Get(fields.ByName("group_token")).List().Get(1).String(); got != RedactedValue {
		t.Errorf("group_token[1] = %q, want %q", got, RedactedValue)
	}
	if got := r.SecretValues(m); !slices.Equal(got, []string{canary, "other-secret"}) {
		t.Errorf("SecretValues = %q", got)
	}
}

func TestRedactRecursiveTypes(t *testing.T) {
	// Inner -> Outer -> Inner: a cycle where the secret sits in the type compiled second.
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	file := buildFile(t, "test.cycle",
		&descriptorpb.DescriptorProto{Name: proto.String("Inner"), Field: []*descriptorpb.FieldDescriptorProto{
			field("back", 1, msg, ".test.cycle.Outer", false, nil),
			field("many", 2, msg, ".test.cycle.Outer", true, nil),
		}},
		&descriptorpb.DescriptorProto{Name: proto.String("Outer"), Field: []*descriptorpb.FieldDescriptorProto{
			field("in", 1, msg, ".test.cycle.Inner", false, nil),
			field("secret", 2, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "", false, unknownOption(backends.CSISecretOption)),
		}},
	)
	inner, outer := file.Messages().Get(0), file.Messages().Get(1)
	newOuter := func(secret string, in *dynamicpb.Message) *dynamicpb.Message {
		o := dynamicpb.NewMessage(outer)
		o.Set(outer.Fields().ByName("secret"), protoreflect.ValueOfBytes([]byte(secret)))
		if in != nil {
			o.Set(outer.Fields().ByName("in"), protoreflect.ValueOfMessage(in))
		}
		return o
	}
	deep := dynamicpb.NewMessage(inner)
	deep.Set(inner.Fields().ByName("back"), protoreflect.ValueOfMessage(newOuter("deep-secret", nil)))
	root := dynamicpb.NewMessage(inner)
	root.Set(inner.Fields().ByName("back"), protoreflect.ValueOfMessage(newOuter(canary, deep)))
	root.Mutable(inner.Fields().ByName("many")).List().Append(protoreflect.ValueOfMessage(newOuter("listed", nil)))

	r := NewRedactor()
	assertNoCanary(t, r.Redact(root))
	if got := r.SecretValues(root); !slices.Equal(got, []string{canary, "deep-secret", "listed"}) {
		t.Errorf("SecretValues = %q", got)
	}
}

func TestRedactConcurrent(t *testing.T) {
	r := NewRedactor()
	msgs := []proto.Message{
		&csi.CreateVolumeRequest{Secrets: canarySecrets(), VolumeCapabilities: []*csi.VolumeCapability{mountCap(canary)}},
		&csi.NodeStageVolumeRequest{Secrets: canarySecrets(), VolumeContext: map[string]string{"k": canary}},
		&csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: &csi.Volume{VolumeContext: map[string]string{"k": canary}}}}},
		&volumegroup.CreateVolumeGroupRequest{Secrets: canarySecrets()},
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				m := msgs[(g+i)%len(msgs)]
				if js := protojson.Format(r.Redact(m)); strings.Contains(js, canary) {
					t.Errorf("canary leaked: %s", js)
					return
				}
				if !slices.Contains(r.SecretValues(m), canary) {
					t.Errorf("SecretValues of %T lacks the canary", m)
					return
				}
			}
		}()
	}
	wg.Wait()
}
