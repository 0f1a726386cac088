package proxy

import (
	"math"
	"reflect"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// goStruct locates, in the generated Go struct of a message type, the fields that
// protoreflect reads slowly, so that the redactor and the validator read them with plain
// reflect: map<string, string> fields (CSI's parameters, secrets, contexts and topology
// segments), repeated strings, singular and repeated message fields, and plain scalars.
// protoreflect allocates for every map, list, key and value it hands out, reaches a nested
// message through a type lookup, and checks every field it is asked for; those fields are
// most of what CSI messages hold. Every other field (oneof members, fields with explicit
// presence, bytes, maps of other types) is read through protoreflect. The zero value knows no
// field. Immutable once built.
type goStruct struct {
	goType reflect.Type // the generated *T of the message type
	fields []goField    // by field index
}

// goKind is how a field is read.
type goKind uint8

const (
	goReflect   goKind = iota // through protoreflect
	goStringMap               // map[string]string
	goStrings                 // []string
	goMessage                 // *C, C a generated message
	goMessages                // []*C
	goScalar                  // a string, bool, number or enum without presence (see goScalarValue)
)

// goField is how one field is read, and from which field of the Go struct.
type goField struct {
	kind  goKind
	index int // the struct field, unless goReflect
}

// newGoStruct finds the generated struct of md; the zero goStruct when md has none in the
// registry (a dynamic message).
func newGoStruct(md protoreflect.MessageDescriptor) goStruct {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil || mt.Descriptor() != md {
		return goStruct{}
	}
	t := reflect.TypeOf(mt.Zero().Interface())
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return goStruct{}
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
	s := goStruct{goType: t, fields: make([]goField, fields.Len())}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if j, ok := byName[string(fd.Name())]; ok {
			s.fields[i] = goField{kind: goKindOf(fd, st.Field(j).Type), index: j}
		}
	}
	return s
}

// goKindOf returns how fd, held in a struct field of Go type t, is read: goReflect unless t is
// the type generated code gives fd. A oneof's members (proto3 optional fields included) live
// behind an interface or a pointer: protoreflect reads them.
func goKindOf(fd protoreflect.FieldDescriptor, t reflect.Type) goKind {
	message := fd.Kind() == protoreflect.MessageKind
	switch {
	case fd.ContainingOneof() != nil:
	case fd.IsMap():
		if isStringMap(fd) && t == reflect.TypeFor[map[string]string]() {
			return goStringMap
		}
	case fd.IsList() && message:
		if t.Kind() == reflect.Slice && isGoMessage(t.Elem()) {
			return goMessages
		}
	case fd.IsList():
		if fd.Kind() == protoreflect.StringKind && t == reflect.TypeFor[[]string]() {
			return goStrings
		}
	case message:
		if isGoMessage(t) {
			return goMessage
		}
	case !fd.HasPresence() && scalarGoKinds[fd.Kind()] == t.Kind():
		return goScalar
	}
	return goReflect
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

// goScalarValue is the value of fv, the struct field of the goScalar field fd, as
// protoreflect's Get would return it.
func goScalarValue(fd protoreflect.FieldDescriptor, fv reflect.Value) protoreflect.Value {
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
	default: // reflect.Float64, as goKindOf allows no other
		return protoreflect.ValueOfFloat64(fv.Float())
	}
}

// isGoMessage reports whether t is the pointer type of a generated message.
func isGoMessage(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer && t.Implements(reflect.TypeFor[proto.Message]())
}

// of returns the struct m points to; ok is false, for m to be read through protoreflect, when
// s knows no field or m is not a non-nil message of s's generated type.
func (s *goStruct) of(m protoreflect.Message) (v reflect.Value, ok bool) {
	if s.goType == nil {
		return reflect.Value{}, false
	}
	return s.ofGo(reflect.ValueOf(m.Interface()))
}

// ofGo is of for a message the caller holds as its Go pointer v (a *T): cheaper than going
// through protoreflect's Interface.
func (s *goStruct) ofGo(v reflect.Value) (reflect.Value, bool) {
	if s.goType == nil || v.Type() != s.goType || v.IsNil() {
		return reflect.Value{}, false
	}
	return v.Elem(), true
}

// goSet reports whether the struct field v of a goField that is not goReflect is populated,
// as protoreflect's Has would: a message pointer not nil, a list, map or string not empty, a
// number not zero; a float is set unless all its bits are zero (-0.0 is set).
func goSet(v reflect.Value) bool {
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

// goMessageAt returns the message held by v, a *C of a goMessage field or element of a
// goMessages field (nil: an absent message, which reads as empty).
func goMessageAt(v reflect.Value) protoreflect.Message {
	return v.Interface().(proto.Message).ProtoReflect()
}

// isStringMap reports whether fd is a map<string, string>.
func isStringMap(fd protoreflect.FieldDescriptor) bool {
	return fd.IsMap() && fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind
}

// stringMap returns the entries of the map<string, string> field fd of m: the generated
// struct's own Go map when s knows it (to be read only), else a copy read through
// protoreflect.
func (s *goStruct) stringMap(m protoreflect.Message, fd protoreflect.FieldDescriptor) map[string]string {
	if v, ok := s.of(m); ok {
		if f := s.fields[fd.Index()]; f.kind == goStringMap {
			return v.Field(f.index).Interface().(map[string]string)
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
