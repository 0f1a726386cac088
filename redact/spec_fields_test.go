package redact

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestSpecFieldsExist: every field the spec tables name is a field of the compiled-in protos
// of its kind (a misspelt name would leave a secret in the clear without a word).
func TestSpecFieldsExist(t *testing.T) {
	for _, n := range append(slices.Clone(specSecretFields), specContextFields...) {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		fd, ok := d.(protoreflect.FieldDescriptor)
		if !ok {
			t.Errorf("%s is not a field", n)
			continue
		}
		if slices.Contains(specContextFields, n) && (!fd.IsMap() || fd.MapValue().Kind() != protoreflect.StringKind) {
			t.Errorf("%s is not a map<string, string>", n)
		}
	}
}

// TestV0SecretsRedacted: every CSI v0 request with secrets, each secret map holding a canary,
// comes out of Redact and JSON without it, and SecretValues finds it.
func TestV0SecretsRedacted(t *testing.T) {
	const canary = "CANARY-v0-secret-0c1d"
	r := NewRedactor()
	withSecrets := 0
	for method, req := range testutil.V0Requests(map[string]string{"password": canary}) {
		if !strings.Contains(protojson.Format(req), canary) {
			continue // no secret field
		}
		withSecrets++
		if got := r.SecretValues(req); !slices.Equal(got, []string{canary}) {
			t.Errorf("%s: SecretValues = %q, want the canary", method, got)
		}
		if s := protojson.Format(r.Redact(req)); strings.Contains(s, canary) {
			t.Errorf("%s: Redact left the canary: %s", method, s)
		}
		if s := r.JSON(req); strings.Contains(s, canary) {
			t.Errorf("%s: JSON left the canary: %s", method, s)
		}
	}
	if withSecrets != 8 {
		t.Errorf("%d v0 requests carry secrets, want 8 (six of v0.2, two of v0.3)", withSecrets)
	}
}

// TestV0ContextsRedacted: v0's counterparts of v1's contexts (publish_info, attributes,
// volume_attributes) have their values redacted, safe keys aside, like volume_context.
func TestV0ContextsRedacted(t *testing.T) {
	const canary = "CANARY-v0-chap-5e21"
	msgs := []proto.Message{
		&csiv0.ControllerPublishVolumeResponse{PublishInfo: map[string]string{"chap": canary, "lun": "7"}},
		&csiv0.CreateVolumeResponse{Volume: &csiv0.Volume{Id: "vol-1", Attributes: map[string]string{"chap": canary, "lun": "7"}}},
		&csiv0.NodePublishVolumeRequest{VolumeId: "vol-1", PublishInfo: map[string]string{"chap": canary},
			VolumeAttributes: map[string]string{"chap": canary, "lun": "7"}},
	}
	r := NewRedactor(WithSafeContextKeys("lun"))
	for _, m := range msgs {
		name := m.ProtoReflect().Descriptor().FullName()
		if got := r.SecretValues(m); !slices.Equal(got, []string{canary}) {
			t.Errorf("%s: SecretValues = %q, want the canary", name, got)
		}
		s := r.JSON(m)
		if strings.Contains(s, canary) || !strings.Contains(s, `"7"`) {
			t.Errorf("%s: JSON = %s, want the canary redacted and the safe key's value kept", name, s)
		}
	}
}
