package proxy

import (
	"reflect"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// goStringMaps locates the Go maps behind the map<string, string> fields of a generated
// message type (CSI's parameters, secrets, contexts and topology segments), so that the
// redactor and the validator read them directly: protoreflect's map access allocates for
// every key and value it hands out, and those maps are most of what CSI messages hold.
// The zero value knows no field; every lookup then reports false.
type goStringMaps struct {
	goType reflect.Type // the generated *T of the message type
	index  []int        // by field index: the struct field of a map<string, string>, or -1
}

// newGoStringMaps finds the generated struct of md; the zero goStringMaps when md has none in
// the registry (a dynamic message), no map<string, string> field, or a field that cannot be
// matched by its protobuf tag.
func newGoStringMaps(md protoreflect.MessageDescriptor) goStringMaps {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil || mt.Descriptor() != md {
		return goStringMaps{}
	}
	t := reflect.TypeOf(mt.Zero().Interface())
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return goStringMaps{}
	}
	st := t.Elem()
	byName := map[string]int{}
	for i := range st.NumField() {
		for _, part := range strings.Split(st.Field(i).Tag.Get("protobuf"), ",") {
			if name, ok := strings.CutPrefix(part, "name="); ok {
				byName[name] = i
			}
		}
	}
	fields := md.Fields()
	idx := make([]int, fields.Len())
	found := false
	for i := range fields.Len() {
		idx[i] = -1
		if fd := fields.Get(i); isStringMap(fd) {
			j, ok := byName[string(fd.Name())]
			if !ok || st.Field(j).Type != reflect.TypeOf(map[string]string(nil)) {
				return goStringMaps{}
			}
			idx[i], found = j, true
		}
	}
	if !found {
		return goStringMaps{}
	}
	return goStringMaps{goType: t, index: idx}
}

// isStringMap reports whether fd is a map<string, string>.
func isStringMap(fd protoreflect.FieldDescriptor) bool {
	return fd.IsMap() && fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind
}

// get returns the Go map of field i of m, when g knows it and m is of g's generated type. The
// map belongs to m: it must only be read.
func (g goStringMaps) get(m protoreflect.Message, i int) (map[string]string, bool) {
	if g.goType == nil || g.index[i] < 0 {
		return nil, false
	}
	v := reflect.ValueOf(m.Interface())
	if v.Type() != g.goType {
		return nil, false
	}
	return v.Elem().Field(g.index[i]).Interface().(map[string]string), true
}

// stringMap returns the entries of the map<string, string> field fd of m: the generated
// struct's own Go map when g knows it (to be read only), else a copy read through
// protoreflect.
func (g goStringMaps) stringMap(m protoreflect.Message, fd protoreflect.FieldDescriptor) map[string]string {
	if gm, ok := g.get(m, fd.Index()); ok {
		return gm
	}
	mp := m.Get(fd).Map()
	out := make(map[string]string, mp.Len())
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		out[k.String()] = v.String()
		return true
	})
	return out
}
