package translate

import (
	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// Publishing: v1's publish_context, volume_context and secrets are v0's publish_info,
// volume_attributes and controller_publish_secrets / controller_unpublish_secrets /
// node_stage_secrets / node_publish_secrets.

// capabilityToV0Request is the conversion of a v1 request whose one field of a type of its
// own version is volume_capability (ControllerPublishVolume, NodeStageVolume,
// NodePublishVolume): the capability as capabilityToV0 says, every other field as it is.
func capabilityToV0Request(m, _ proto.Message, to protoreflect.MessageType) (proto.Message, error) {
	c, err := capabilityToV0(m.(interface{ GetVolumeCapability() *csi.VolumeCapability }).GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	return withCapability(m, to, c), nil
}

// capabilityToV1Request is capabilityToV0Request's other direction: the v0 request's
// capability as capabilityToV1 says, every other field as it is.
func capabilityToV1Request(m, _ proto.Message, to protoreflect.MessageType) (proto.Message, error) {
	c := capabilityToV1(m.(interface {
		GetVolumeCapability() *csiv0.VolumeCapability
	}).GetVolumeCapability())
	return withCapability(m, to, c), nil
}

// withCapability is a new message of type to with the fields of m that cross as they are,
// and volume_capability c (unset when nil).
func withCapability[C proto.Message](m proto.Message, to protoreflect.MessageType, c C) proto.Message {
	out := to.New()
	crossFields(m, out.Interface())
	if c.ProtoReflect().IsValid() {
		out.Set(out.Descriptor().Fields().ByName("volume_capability"), protoreflect.ValueOfMessage(c.ProtoReflect()))
	}
	return out.Interface()
}
