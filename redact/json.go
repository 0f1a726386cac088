package redact

import (
	"encoding/base64"
	"maps"
	"reflect"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/internal/protoread"
)

// JSON returns m as one line of JSON with every secret value replaced as Redact replaces it,
// in protojson's form (its field names and value encodings, well-known types included), for
// log lines. It writes straight from m, following the same compiled plan as Redact, without
// copying the message: several times faster than formatting Redact(m) with protojson.
// Unknown fields and extensions are left out. JSON(nil) is "{}".
func (r *Redactor) JSON(m proto.Message) string {
	if m == nil {
		return "{}"
	}
	rm := m.ProtoReflect()
	if !rm.IsValid() {
		return "{}"
	}
	p := r.planFor(rm.Descriptor())
	if len(p.fields) == 0 {
		return "{}" // Probe, GetPluginInfo, the Get…Capabilities requests, Empty
	}
	bp := jsonBuffers.Get().(*[]byte)
	b := r.appendMessage((*bp)[:0], rm, reflect.ValueOf(m), p)
	s := "{}" // a message with no field set, without a copy
	if string(b) != s {
		s = string(b)
	}
	*bp = b
	jsonBuffers.Put(bp)
	return s
}

// jsonBuffers are JSON's scratch buffers.
var jsonBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendMessage appends m, redacted by p, as a JSON value: its fields in index order, as
// protojson orders them. gv is m's Go pointer when the caller has it (else the zero Value).
func (r *Redactor) appendMessage(b []byte, m protoreflect.Message, gv reflect.Value, p *redactPlan) []byte {
	if p.wellKnown {
		if wkt, ok := appendWellKnown(b, m); ok {
			return wkt
		}
	}
	var sv reflect.Value
	var byStruct bool
	if gv.IsValid() {
		sv, byStruct = p.gs.OfGo(gv)
	} else {
		sv, byStruct = p.gs.Of(m)
	}
	b = append(b, '{')
	first := true
	for i, fd := range p.fields {
		var f protoread.Field // ByReflect unless m is read by its struct
		var fv reflect.Value
		if byStruct {
			f = p.gs.Field(i)
		}
		if f.Kind == protoread.ByReflect {
			if !m.Has(fd) {
				continue
			}
		} else if fv = sv.Field(f.Index); !protoread.IsSet(fv) {
			continue
		}
		step := p.byIndex[i]
		if step != nil && step.cleared {
			continue // a secret that is not text is left out, as Redact clears it
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, p.jsonKeys[i]...)
		switch f.Kind {
		case protoread.ByReflect:
			b = r.appendField(b, fd, m.Get(fd), step)
		case protoread.ScalarKind:
			b = r.appendField(b, fd, protoread.ScalarValue(fd, fv), step)
		default:
			b = r.appendGoField(b, f.Kind, fv, step)
		}
	}
	return append(b, '}')
}

// appendGoField appends the populated field fv of a Go struct, read as kind says, redacted by
// step. A message field always has a step (redactDescend: step.next is the plan of what it
// holds), as a secret one is left out.
func (r *Redactor) appendGoField(b []byte, kind protoread.Kind, fv reflect.Value, step *redactStep) []byte {
	switch kind {
	case protoread.StringMapKind:
		return r.appendStringMap(b, fv.Interface().(map[string]string), step)
	case protoread.MessageKind:
		return r.appendMessage(b, protoread.MessageAt(fv), fv, step.next)
	}
	b = append(b, '[')
	for i := range fv.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		switch {
		case kind == protoread.MessagesKind:
			ev := fv.Index(i)
			b = r.appendMessage(b, protoread.MessageAt(ev), ev, step.next)
		case step != nil && step.act == redactAll:
			b = append(b, redactedJSON...)
		default:
			b = appendJSONString(b, fv.Index(i).String())
		}
	}
	return append(b, ']')
}

// appendStringMap appends a map<string, string> field read from its Go map, keys sorted as
// protojson sorts them, redacted by step.
func (r *Redactor) appendStringMap(b []byte, gm map[string]string, step *redactStep) []byte {
	// CSI's maps are small: their keys are gathered into an array on the stack and sorted
	// there (stores into a local array need no GC write barrier, unlike stores through a
	// slice, which cost as much as the rest while a collection runs). A value is looked up
	// only when it is written: a secrets map's never are.
	const small = 16
	if len(gm) > small {
		return r.appendStringEntries(b, gm, slices.Sorted(maps.Keys(gm)), step)
	}
	var keys [small]string
	n := 0
	for k := range gm {
		keys[n] = k
		n++
	}
	for i := 1; i < n; i++ { // insertion sort: the fastest for so few
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return r.appendStringEntries(b, gm, keys[:n], step)
}

// appendStringEntries appends the entries of gm, in the order of keys, redacted by step.
func (r *Redactor) appendStringEntries(b []byte, gm map[string]string, keys []string, step *redactStep) []byte {
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		switch {
		case step != nil && step.act == redactAll,
			step != nil && step.act == redactContext && !r.cfg.safeContextKeys[k]:
			b = append(b, redactedJSON...)
		default:
			b = appendJSONString(b, gm[k])
		}
	}
	return append(b, '}')
}

// appendField appends the value v of field fd, redacted by step (nil: as it is).
func (r *Redactor) appendField(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value, step *redactStep) []byte {
	switch {
	case fd.IsMap():
		entries := sortedEntries(v.Map(), fd.MapKey().Kind())
		b = append(b, '{')
		for i, e := range entries {
			if i > 0 {
				b = append(b, ',')
			}
			key := e.k.String()
			b = appendJSONString(b, key)
			b = append(b, ':')
			switch {
			case step != nil && step.act == redactAll,
				step != nil && step.act == redactContext && !r.cfg.safeContextKeys[key]:
				b = appendRedacted(b, fd.MapValue())
			default:
				b = r.appendSingle(b, fd.MapValue(), e.v, step)
			}
		}
		return append(b, '}')
	case fd.IsList():
		l := v.List()
		b = append(b, '[')
		for i := range l.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			if step != nil && step.act == redactAll {
				b = appendRedacted(b, fd)
			} else {
				b = r.appendSingle(b, fd, l.Get(i), step)
			}
		}
		return append(b, ']')
	case step != nil && step.act == redactAll:
		return appendRedacted(b, fd)
	}
	return r.appendSingle(b, fd, v, step)
}

// appendRedacted appends RedactedValue in the form of a field of fd's kind.
func appendRedacted(b []byte, fd protoreflect.FieldDescriptor) []byte {
	if fd.Kind() == protoreflect.BytesKind {
		return append(b, redactedBytesJSON...)
	}
	return append(b, redactedJSON...)
}

// redactedJSON and redactedBytesJSON are RedactedValue as the JSON value of a string field and
// of a bytes field (base64).
var (
	redactedJSON      = string(appendJSONString(nil, RedactedValue))
	redactedBytesJSON = string(appendJSONString(nil, base64.StdEncoding.EncodeToString([]byte(RedactedValue))))
)

// appendSingle appends one value of fd's kind (a map value or list element included).
func (r *Redactor) appendSingle(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value, step *redactStep) []byte {
	if k := fd.Kind(); k == protoreflect.MessageKind || k == protoreflect.GroupKind {
		if step != nil && step.next != nil {
			return r.appendMessage(b, v.Message(), reflect.Value{}, step.next)
		}
		return r.appendMessage(b, v.Message(), reflect.Value{}, r.planFor(v.Message().Descriptor()))
	}
	return appendScalar(b, fd, v)
}
