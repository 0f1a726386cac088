package protoread

import (
	"math"
	"reflect"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Struct locates, in the generated Go struct of a message type, the fields that
// protoreflect reads slowly, so that the redactor and the validator read them with plain
// reflect: map<string, string> fields (CSI's parameters, secrets, contexts and topology
// segments), repeated strings, singular and repeated message fields, and plain scalars.
// protoreflect allocates for every map, list, key and value it hands out, reaches a nested
// message through a type lookup, and checks every field it is asked for; those fields are
// most of what CSI messages hold. Every other field (oneof members, fields with explicit
// presence, bytes, maps of other types) is read through protoreflect. The zero value knows no
// field. Immutable once built.
type Struct struct {
	goType reflect.Type // the generated *T of the message type
	fields []Field      // by field index
}

// Kind is how a field is read.
type Kind uint8

const (
	ByReflect     Kind = iota // through protoreflect
	StringMapKind             // map[string]string
	StringsKind               // []string
	MessageKind               // *C, C a generated message
	MessagesKind              // []*C
	ScalarKind                // a string, bool, number or enum without presence (see ScalarValue)
)

// Field is how one field is read, and from which field of the Go struct.
type Field struct {
	Kind  Kind
	Index int // the struct field, unless ByReflect
}

// NewStruct finds the generated struct of md; the zero Struct when md has none in the
// registry (a dynamic message).
func NewStruct(md protoreflect.MessageDescriptor) Struct {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil || mt.Descriptor() != md {
		return Struct{}
	}
	t := reflect.TypeOf(mt.Zero().Interface())
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return Struct{}
	}
	st := t.Elem()
	byName := map[string]int{}
	for i := range st.NumField() {
		for part := range strings.SplitSeq(st.Field(i).Tag.Get("protobuf"), ",") {
			if name, ok := strings.CutPrefix(part, "name="); ok {
				byName[name] = i
			}
		}
	}
	fields := md.Fields()
	s := Struct{goType: t, fields: make([]Field, fields.Len())}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if j, ok := byName[string(fd.Name())]; ok {
			s.fields[i] = Field{Kind: kindOf(fd, st.Field(j).Type), Index: j}
		}
	}
	return s
}

// kindOf returns how fd, held in a struct field of Go type t, is read: ByReflect unless t is
// the type generated code gives fd. A oneof's members (proto3 optional fields included) live
// behind an interface or a pointer: protoreflect reads them.
func kindOf(fd protoreflect.FieldDescriptor, t reflect.Type) Kind {
	message := fd.Kind() == protoreflect.MessageKind
	switch {
	case fd.ContainingOneof() != nil:
	case fd.IsMap():
		if IsStringMap(fd) && t == reflect.TypeFor[map[string]string]() {
			return StringMapKind
		}
	case fd.IsList() && message:
		if t.Kind() == reflect.Slice && isGoMessage(t.Elem()) {
			return MessagesKind
		}
	case fd.IsList():
		if fd.Kind() == protoreflect.StringKind && t == reflect.TypeFor[[]string]() {
			return StringsKind
		}
	case message:
		if isGoMessage(t) {
			return MessageKind
		}
	case !fd.HasPresence() && scalarGoKinds[fd.Kind()] == t.Kind():
		return ScalarKind
	}
	return ByReflect
}

// scalarGoKinds is the Go kind generated code gives a plain scalar field of each kind (bytes,
// groups and messages have none).
var scalarGoKinds = map[protoreflect.Kind]reflect.Kind{
	protoreflect.StringKind: reflect.String, protoreflect.BoolKind: reflect.Bool, protoreflect.EnumKind: reflect.Int32,
	protoreflect.Int32Kind: reflect.Int32, protoreflect.Sint32Kind: reflect.Int32, protoreflect.Sfixed32Kind: reflect.Int32,
	protoreflect.Int64Kind: reflect.Int64, protoreflect.Sint64Kind: reflect.Int64, protoreflect.Sfixed64Kind: reflect.Int64,
	protoreflect.Uint32Kind: reflect.Uint32, protoreflect.Fixed32Kind: reflect.Uint32,
	protoreflect.Uint64Kind: reflect.Uint64, protoreflect.Fixed64Kind: reflect.Uint64,
	protoreflect.FloatKind: reflect.Float32, protoreflect.DoubleKind: reflect.Float64,
}

// ScalarValue is the value of fv, the struct field of the ScalarKind field fd, as
// protoreflect's Get would return it.
func ScalarValue(fd protoreflect.FieldDescriptor, fv reflect.Value) protoreflect.Value {
	switch fv.Kind() {
	case reflect.String:
		return protoreflect.ValueOfString(fv.String())
	case reflect.Bool:
		return protoreflect.ValueOfBool(fv.Bool())
	case reflect.Int32:
		if fd.Kind() == protoreflect.EnumKind {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(fv.Int()))
		}
		return protoreflect.ValueOfInt32(int32(fv.Int()))
	case reflect.Int64:
		return protoreflect.ValueOfInt64(fv.Int())
	case reflect.Uint32:
		return protoreflect.ValueOfUint32(uint32(fv.Uint()))
	case reflect.Uint64:
		return protoreflect.ValueOfUint64(fv.Uint())
	case reflect.Float32:
		return protoreflect.ValueOfFloat32(float32(fv.Float()))
	default: // reflect.Float64, as kindOf allows no other
		return protoreflect.ValueOfFloat64(fv.Float())
	}
}

// isGoMessage reports whether t is the pointer type of a generated message.
func isGoMessage(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer && t.Implements(reflect.TypeFor[proto.Message]())
}

// Field returns how the field of index i (its descriptor's Index) is read: ByReflect when s
// knows no field.
func (s *Struct) Field(i int) Field {
	if s.fields == nil {
		return Field{}
	}
	return s.fields[i]
}

// Of returns the struct m points to; ok is false, for m to be read through protoreflect, when
// s knows no field or m is not a non-nil message of s's generated type.
func (s *Struct) Of(m protoreflect.Message) (v reflect.Value, ok bool) {
	if s.goType == nil {
		return reflect.Value{}, false
	}
	return s.OfGo(reflect.ValueOf(m.Interface()))
}

// OfGo is Of for a message the caller holds as its Go pointer v (a *T): cheaper than going
// through protoreflect's Interface.
func (s *Struct) OfGo(v reflect.Value) (reflect.Value, bool) {
	if s.goType == nil || v.Type() != s.goType || v.IsNil() {
		return reflect.Value{}, false
	}
	return v.Elem(), true
}

// IsSet reports whether the struct field v of a Field that is not ByReflect is populated,
// as protoreflect's Has would: a message pointer not nil, a list, map or string not empty, a
// number not zero; a float is set unless all its bits are zero (-0.0 is set).
func IsSet(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil()
	case reflect.Map, reflect.Slice, reflect.String:
		return v.Len() > 0
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(v.Float()) != 0
	}
	return !v.IsZero()
}

// MessageAt returns the message held by v, a *C of a MessageKind field or element of a
// MessagesKind field (nil: an absent message, which reads as empty).
func MessageAt(v reflect.Value) protoreflect.Message {
	return v.Interface().(proto.Message).ProtoReflect()
}

// IsStringMap reports whether fd is a map<string, string>.
func IsStringMap(fd protoreflect.FieldDescriptor) bool {
	return fd.IsMap() && fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind
}

// StringMap returns the entries of the map<string, string> field fd of m: the generated
// struct's own Go map when s knows it (to be read only), else a copy read through
// protoreflect.
func (s *Struct) StringMap(m protoreflect.Message, fd protoreflect.FieldDescriptor) map[string]string {
	if v, ok := s.Of(m); ok {
		if f := s.fields[fd.Index()]; f.Kind == StringMapKind {
			return v.Field(f.Index).Interface().(map[string]string)
		}
	}
	mp := m.Get(fd).Map()
	out := make(map[string]string, mp.Len())
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		out[k.String()] = v.String()
		return true
	})
	return out
}
