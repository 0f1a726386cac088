package rest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/backends"
)

// A request field this gateway's CSI version does not know (a newer spec's, or a vendor's)
// reaches the decoded request as an unknown field: protobuf wire bytes under a field number,
// with no name and no type. protojson writes a field by its JSON name, so it cannot write
// these, and there is no standard JSON form that would carry them to the appliance. Dropping
// them would answer OK to a request the appliance never saw whole — a caller that asked for
// something new (a newer spec's option) would believe it was done — so the connect backend
// refuses the request instead, naming the fields. A grpc backend passes them on untouched.

// maxUnknownListed bounds how many unknown fields a refusal names.
const maxUnknownListed = 8

// unknownFields returns where m, a decoded request, holds fields its type does not know, at
// any depth: "field 42", "volume_capabilities[0]: field 9", "parameters[\"k\"]: field 3".
func unknownFields(m protoreflect.Message) []string {
	var out []string
	collectUnknown(m, "", &out)
	return out
}

func collectUnknown(m protoreflect.Message, path string, out *[]string) {
	where := ""
	if path != "" {
		where = path + ": "
	}
	for _, n := range unknownNumbers(m.GetUnknown()) {
		*out = append(*out, fmt.Sprintf("%sfield %d", where, n))
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := path
		if name != "" {
			name += "."
		}
		name += string(fd.Name())
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				collectUnknown(mv.Message(), name+"["+strconv.Quote(k.String())+"]", out)
				return true
			})
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				collectUnknown(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", name, i), out)
			}
		case fd.Message() != nil && !fd.IsMap():
			collectUnknown(v.Message(), name, out)
		}
		return true
	})
}

// unknownNumbers returns the distinct field numbers in b, raw unknown fields, in order.
func unknownNumbers(b []byte) []protowire.Number {
	var nums []protowire.Number
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nums
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nums
		}
		if !slices.Contains(nums, num) {
			nums = append(nums, num)
		}
		b = b[n+m:]
	}
	return nums
}

// refuseUnknownFields returns the ClassInvalid error that refuses req, a request of m, when
// it holds fields the gateway does not know; nil otherwise.
func (b *Backend) refuseUnknownFields(m *method, req proto.Message) error {
	fields := unknownFields(req.ProtoReflect())
	if len(fields) == 0 {
		return nil
	}
	listed := fields[:min(len(fields), maxUnknownListed)]
	more := ""
	if n := len(fields) - len(listed); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return newError(backends.ClassInvalid, b.name, m.name, fmt.Sprintf(
		"the request holds fields this gateway's %s does not know (%s%s), which the connect protocol's JSON cannot carry to the appliance; "+
			"refused rather than sent without them: route %s to a grpc backend, which passes them on, or use a gateway built with the newer CSI spec",
		m.in.Descriptor().FullName(), strings.Join(listed, ", "), more, m.path))
}
