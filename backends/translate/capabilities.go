package translate

import (
	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// Volume capabilities: the access type and access mode. v0's modes are v1's first five,
// with the same numbers; v1's SINGLE_NODE_SINGLE_WRITER and SINGLE_NODE_MULTI_WRITER, and
// MountVolume.volume_mount_group, have no v0 equivalent (a v0 driver cannot advertise the
// capabilities that let a caller use them).

// capabilityToV0 converts a v1 volume capability; nil stays nil. It refuses what v0 cannot
// express: a mount group, and the access modes v1 added.
func capabilityToV0(c *csi.VolumeCapability) (*csiv0.VolumeCapability, error) {
	if c.GetMount().GetVolumeMountGroup() != "" {
		return nil, cannotCross("volume_mount_group has no CSI v0 equivalent (the driver cannot advertise VOLUME_MOUNT_GROUP)")
	}
	if mode := c.GetAccessMode().GetMode(); mode > csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER {
		return nil, cannotCross("access mode %s has no CSI v0 equivalent (the driver cannot advertise SINGLE_NODE_MULTI_WRITER)", mode)
	}
	return capabilityAcross[*csiv0.VolumeCapability](c), nil
}

// capabilityToV1 converts a v0 volume capability; nil stays nil. Every v0 capability has a
// v1 equivalent.
func capabilityToV1(c *csiv0.VolumeCapability) *csi.VolumeCapability {
	return capabilityAcross[*csi.VolumeCapability](c)
}

// capabilityAcross is c in the other version, T: the same access type (block, or mount with
// its fields that cross as they are) and the same access mode (the two enums number alike
// the modes both have); nil stays nil.
func capabilityAcross[T proto.Message](c proto.Message) T {
	var out T
	src := c.ProtoReflect()
	if !src.IsValid() {
		return out
	}
	dst := out.ProtoReflect().Type().New()
	for _, name := range []protoreflect.Name{"block", "mount", "access_mode"} {
		from, to := src.Descriptor().Fields().ByName(name), dst.Descriptor().Fields().ByName(name)
		if !src.Has(from) {
			continue
		}
		f, t := src.Get(from).Message(), dst.Mutable(to).Message()
		crossFields(f.Interface(), t.Interface())
		if name == "access_mode" {
			t.Set(t.Descriptor().Fields().ByName("mode"), f.Get(f.Descriptor().Fields().ByName("mode")))
		}
	}
	return dst.Interface().(T)
}

func capabilitiesToV0(cs []*csi.VolumeCapability) ([]*csiv0.VolumeCapability, error) {
	if cs == nil {
		return nil, nil
	}
	out := make([]*csiv0.VolumeCapability, len(cs))
	for i, c := range cs {
		v, err := capabilityToV0(c)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func capabilitiesToV1(cs []*csiv0.VolumeCapability) []*csi.VolumeCapability {
	return mapSlice(cs, capabilityToV1)
}

// Capability sets: what a backend advertises is intersected with what the translation
// carries, so a caller is never told of an RPC or a feature the other version lacks. The
// enums share their numbers for the values both versions have.

// The highest value of each v0 enum; v1's values up to it mean the same.
const (
	lastV0PluginService = csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS // v0's ACCESSIBILITY_CONSTRAINTS
	lastV0ControllerRPC = csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS
	lastV0NodeRPC       = csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME
)

// capabilitiesAcross is the conversion of a Get*Capabilities answer into the same answer
// of the other version, keeping the capabilities whose type is 1 to last (the values both
// versions' enums give the same meaning); others are dropped. Both versions write every
// such answer as capabilities[].{holder}.type, holder "service" or "rpc".
func capabilitiesAcross(holder protoreflect.Name, last protoreflect.EnumNumber) conversion {
	return func(from, _ proto.Message, to protoreflect.MessageType) (proto.Message, error) {
		src, dst := from.ProtoReflect(), to.New()
		srcCaps := src.Get(src.Descriptor().Fields().ByName("capabilities")).List()
		dstField := dst.Descriptor().Fields().ByName("capabilities")
		for i := range srcCaps.Len() {
			c := srcCaps.Get(i).Message()
			h := c.Get(c.Descriptor().Fields().ByName(holder)).Message()
			t := h.Get(h.Descriptor().Fields().ByName("type")).Enum()
			if t <= 0 || t > last {
				continue
			}
			out := dst.Mutable(dstField).List()
			dc := out.NewElement().Message()
			dh := dc.Mutable(dc.Descriptor().Fields().ByName(holder)).Message()
			dh.Set(dh.Descriptor().Fields().ByName("type"), protoreflect.ValueOfEnum(t))
			out.Append(protoreflect.ValueOfMessage(dc))
		}
		return dst.Interface(), nil
	}
}

// Topology has the same fields in both versions.

func topologyToV0(t *csi.Topology) *csiv0.Topology { return crossed[*csiv0.Topology](t) }
func topologyToV1(t *csiv0.Topology) *csi.Topology { return crossed[*csi.Topology](t) }

func requirementToV0(r *csi.TopologyRequirement) *csiv0.TopologyRequirement {
	if r == nil {
		return nil
	}
	return &csiv0.TopologyRequirement{Requisite: mapSlice(r.GetRequisite(), topologyToV0), Preferred: mapSlice(r.GetPreferred(), topologyToV0)}
}

func requirementToV1(r *csiv0.TopologyRequirement) *csi.TopologyRequirement {
	if r == nil {
		return nil
	}
	return &csi.TopologyRequirement{Requisite: mapSlice(r.GetRequisite(), topologyToV1), Preferred: mapSlice(r.GetPreferred(), topologyToV1)}
}

// mapSlice converts every element of s; nil stays nil.
func mapSlice[From, To any](s []From, f func(From) To) []To {
	if s == nil {
		return nil
	}
	out := make([]To, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}
