package backends

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Field numbers of the FieldOptions extensions that mark a field as secret. csi.v1.csi_secret
// is also what the csi-addons protos use; vg_csi_secret is the marker of the VolumeGroup
// proposal (spec REQUIREMENTS §4.1), which no Go package registers.
const (
	CSISecretOption   protowire.Number = 1059
	VGCSISecretOption protowire.Number = 1101
)

// HasSecretOption reports whether fd carries csi.v1.csi_secret (or vg_csi_secret) = true.
// Options decoded where the extension was not registered (descriptors built at run time, the
// VolumeGroup proposal) keep it as unknown bytes, so those are read too.
func HasSecretOption(fd protoreflect.FieldDescriptor) bool {
	opts := fd.Options()
	if opts == nil || !opts.ProtoReflect().IsValid() {
		return false
	}
	if v, ok := proto.GetExtension(opts, csi.E_CsiSecret).(bool); ok && v {
		return true
	}
	b := opts.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == CSISecretOption || num == VGCSISecretOption) {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return false
			}
			if v != 0 {
				return true
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return false
		}
		b = b[m:]
	}
	return false
}

// CarriesSecrets reports whether m sets a field marked secret (HasSecretOption) to a
// non-empty value, at any depth: the CSI secrets of a request.
func CarriesSecrets(m protoreflect.Message) bool {
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case HasSecretOption(fd):
			found = true // Range visits set fields only: an empty map or string is not set
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				found = CarriesSecrets(mv.Message())
				return !found
			})
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && !found; i++ {
				found = CarriesSecrets(v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			found = CarriesSecrets(v.Message())
		}
		return !found
	})
	return found
}
