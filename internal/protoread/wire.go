package protoread

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// WireStrings reads the singular string fields fds of raw, a message's wire bytes, into
// values (values[i] for fds[i]; a nil fds[i] is left out) in one pass, without decoding the
// rest of the message: the last occurrence of a field wins, as when decoding, and an absent
// field is "". It reports false when raw is not wire format or a value read is not UTF-8
// (proto.Unmarshal refuses such a message too). Every non-nil fds[i] must be a singular
// string field of raw's message type.
func WireStrings(raw []byte, fds []protoreflect.FieldDescriptor, values []string) bool {
	var found [8][]byte // the raw values, for fds of up to 8 fields without allocating
	vals := found[:0]
	if len(fds) > len(found) {
		vals = make([][]byte, 0, len(fds))
	}
	vals = vals[:len(fds)]
	if !WireValues(raw, fds, vals) {
		return false
	}
	for i, v := range vals {
		values[i] = string(v)
	}
	return true
}

// WireValues is WireStrings without the strings: vals[i] is the value of fds[i] in raw, a
// slice of raw (nil when absent), valid UTF-8.
func WireValues(raw []byte, fds []protoreflect.FieldDescriptor, vals [][]byte) bool {
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return false
		}
		raw = raw[n:]
		m := protowire.ConsumeFieldValue(num, typ, raw)
		if m < 0 {
			return false
		}
		if typ == protowire.BytesType {
			for i, fd := range fds {
				if fd != nil && fd.Number() == num {
					vals[i], _ = protowire.ConsumeBytes(raw[:m])
				}
			}
		}
		raw = raw[m:]
	}
	for _, v := range vals {
		if !utf8.Valid(v) {
			return false
		}
	}
	return true
}

// WireValue returns the value of the singular string field fd in raw as a slice of raw
// (see WireValues): it allocates nothing.
func WireValue(raw []byte, fd protoreflect.FieldDescriptor) ([]byte, bool) {
	var value [1][]byte
	if !WireValues(raw, []protoreflect.FieldDescriptor{fd}, value[:]) {
		return nil, false
	}
	return value[0], true
}

// WireString returns the value of the singular string field fd in raw (see WireValue); it
// returns false when fd is not a singular string field too.
func WireString(raw []byte, fd protoreflect.FieldDescriptor) (string, bool) {
	if !IsSingularString(fd) {
		return "", false
	}
	v, ok := WireValue(raw, fd)
	return string(v), ok
}

// IsSingularString reports whether fd is a string field that is not repeated.
func IsSingularString(fd protoreflect.FieldDescriptor) bool {
	return fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsList()
}
