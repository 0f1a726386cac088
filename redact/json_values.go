package redact

import (
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// appendScalar appends one value of a field of a scalar kind, as protojson writes it.
func appendScalar(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return appendJSONString(b, v.String())
	case protoreflect.BytesKind:
		return appendJSONString(b, base64.StdEncoding.EncodeToString(v.Bytes()))
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return appendJSONString(b, string(ev.Name()))
		}
		return strconv.AppendInt(b, int64(v.Enum()), 10)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(b, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(b, v.Uint(), 10)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b = append(b, '"')
		return append(strconv.AppendInt(b, v.Int(), 10), '"')
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b = append(b, '"')
		return append(strconv.AppendUint(b, v.Uint(), 10), '"')
	case protoreflect.FloatKind:
		return appendFloat(b, v.Float(), 32)
	case protoreflect.DoubleKind:
		return appendFloat(b, v.Float(), 64)
	}
	return append(b, "null"...)
}

// appendFloat appends a float as protojson does: NaN and the infinities as strings.
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// mapEntry is one entry of a map field.
type mapEntry struct {
	k protoreflect.MapKey
	v protoreflect.Value
}

// sortedEntries returns a map's entries in protojson's order: booleans false first, numbers
// by value, strings by bytes.
func sortedEntries(mp protoreflect.Map, kind protoreflect.Kind) []mapEntry {
	entries := make([]mapEntry, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		entries = append(entries, mapEntry{k, v})
		return true
	})
	slices.SortFunc(entries, func(a, c mapEntry) int {
		switch kind {
		case protoreflect.BoolKind:
			return cmpOrdered(boolRank(a.k.Bool()), boolRank(c.k.Bool()))
		case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
			protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
			return cmpOrdered(a.k.Int(), c.k.Int())
		case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
			return cmpOrdered(a.k.Uint(), c.k.Uint())
		}
		return cmpOrdered(a.k.String(), c.k.String())
	})
	return entries
}

func boolRank(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func cmpOrdered[T int64 | uint64 | string](a, c T) int {
	switch {
	case a < c:
		return -1
	case a > c:
		return 1
	}
	return 0
}

// appendWellKnown appends the well-known types protojson writes in their own JSON forms;
// ok is false for any other message. The rare ones CSI does not use (Any, Struct, Value,
// ListValue, FieldMask) go through protojson itself; they hold no CSI secret fields.
func appendWellKnown(b []byte, m protoreflect.Message) ([]byte, bool) {
	md := m.Descriptor()
	if md.ParentFile() == nil || md.ParentFile().Package() != "google.protobuf" {
		return b, false
	}
	fields := md.Fields()
	switch md.Name() {
	case "Timestamp":
		secs, nanos := m.Get(fields.ByName("seconds")).Int(), m.Get(fields.ByName("nanos")).Int()
		t := time.Unix(secs, nanos).UTC()
		b = append(b, '"')
		b = t.AppendFormat(b, "2006-01-02T15:04:05")
		b = appendNanos(b, nanos)
		return append(b, `Z"`...), true
	case "Duration":
		secs, nanos := m.Get(fields.ByName("seconds")).Int(), m.Get(fields.ByName("nanos")).Int()
		b = append(b, '"')
		if secs < 0 || nanos < 0 {
			b = append(b, '-')
			secs, nanos = -secs, -nanos
		}
		b = strconv.AppendInt(b, secs, 10)
		b = appendNanos(b, nanos)
		return append(b, `s"`...), true
	case "DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value", "BoolValue", "StringValue", "BytesValue":
		fd := fields.ByName("value")
		return appendScalar(b, fd, m.Get(fd)), true
	case "Empty":
		return append(b, "{}"...), true
	case "Any", "Struct", "Value", "ListValue", "FieldMask":
		j, err := protojson.Marshal(m.Interface())
		if err != nil {
			return append(b, "null"...), true
		}
		return append(b, j...), true
	}
	return b, false
}

// appendNanos appends a fraction of a second as protojson does: none, or 3, 6 or 9 digits.
func appendNanos(b []byte, nanos int64) []byte {
	if nanos == 0 {
		return b
	}
	digits := strconv.AppendInt(nil, nanos+1e9, 10)[1:] // 9 digits, leading zeros kept
	for len(digits) > 3 && string(digits[len(digits)-3:]) == "000" {
		digits = digits[:len(digits)-3]
	}
	b = append(b, '.')
	return append(b, digits...)
}

// plainJSON8 reports whether none of the 8 bytes of s needs escaping or decoding: all are
// ASCII, and none is a control character, a quote or a backslash. It tests them as one word:
// subtracting 0x20 from every byte borrows into the high bit of each byte below 0x20, and a
// byte equal to '"' or '\\' is zero after an exclusive or, so subtracting 1 borrows there
// (Hacker's Delight, 6-1).
func plainJSON8(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	special := (x - ones*0x20) | (quote-ones) & ^quote | (backslash-ones) & ^backslash
	return (x|special)&highs == 0
}

// appendJSONString appends s as a JSON string, escaped as encoding/json escapes it without
// HTML escaping (the form the scrubber looks for secrets in), invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plainJSON8(s[i:i+8]) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
