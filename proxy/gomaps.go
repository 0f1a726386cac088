package proxy

import (
	"reflect"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// goStruct locates, in the generated Go struct of a message type, the fields that
// protoreflect reads slowly, so that the redactor and the validator read them with plain
// reflect: map<string, string> fields (CSI's parameters, secrets, contexts and topology
// segments), repeated strings, and singular and repeated message fields. protoreflect
// allocates for every map, list, key and value it hands out, and reaches a nested message
// through a type lookup; those fields are most of what CSI messages hold. Every other field
// (scalars, oneof members, maps of other types) is read through protoreflect. The zero value
// knows no field. Immutable once built.
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
	}
	return goReflect
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
	v = reflect.ValueOf(m.Interface())
	if v.Type() != s.goType || v.IsNil() {
		return reflect.Value{}, false
	}
	return v.Elem(), true
}

// goSet reports whether the struct field v of a goField that is not goReflect is populated,
// as protoreflect's Has would: a message pointer not nil, a list or map not empty.
func goSet(v reflect.Value) bool {
	if v.Kind() == reflect.Pointer {
		return !v.IsNil()
	}
	return v.Len() > 0
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
