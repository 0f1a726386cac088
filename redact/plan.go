package redact

import (
	"maps"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/protoread"
)

// redactAction is what a plan does to one field.
type redactAction uint8

const (
	redactAll     redactAction = iota + 1 // every value of the field is secret
	redactContext                         // map values are secret unless their key is safe
	redactDescend                         // message-typed: walk into each message it holds
)

type redactStep struct {
	fd   protoreflect.FieldDescriptor
	act  redactAction
	next *redactPlan // redactDescend only
	// cleared (redactAll only): the field's values are neither strings nor bytes, so Redact
	// clears the field rather than replacing them, and JSON leaves it out.
	cleared bool
}

// redactPlan is what Redact and SecretValues do to messages of one type. Every message-typed
// field has a step, because unknown fields are dropped at every depth. Plans are immutable
// once compiled and may form cycles (recursive messages).
type redactPlan struct {
	md      protoreflect.MessageDescriptor
	steps   []redactStep
	fields  []protoreflect.FieldDescriptor // by field index
	byIndex []*redactStep                  // by field index: the field's step, nil for a field taken as it is
	// gs lets Redactor.JSON and SecretValues read fields from the generated struct.
	gs protoread.Struct
	// jsonKeys, by field index, is how Redactor.JSON opens each field: its JSON name as a
	// JSON string, and a colon.
	jsonKeys []string
	// wellKnown: md is one of the google.protobuf types protojson writes in a form of its own.
	wellKnown  bool
	secret     bool // a secret is reachable from this type: SecretValues has work to do
	extensible bool // the type has extension ranges: populated extensions are cleared
}

// planFor returns the cached plan for md, compiling and caching it on first use. The cache is
// keyed by full name; a different descriptor with a cached name (say a dynamic descriptor of
// another spec version) gets a fresh, uncached plan so it is never redacted by the wrong schema.
func (r *Redactor) planFor(md protoreflect.MessageDescriptor) *redactPlan {
	if plans := r.plans.Load(); plans != nil {
		if p, ok := (*plans)[md.FullName()]; ok {
			if p.md == md {
				return p
			}
			return r.compile(md, false)
		}
	}
	return r.compile(md, true)
}

// compile builds the plans of root and of every message type reachable from it. Whether a type
// leads to a secret is a fixed point over that graph, which keeps recursive types correct.
// With store, the plans are published to the cache (first writer wins).
func (r *Redactor) compile(root protoreflect.MessageDescriptor, store bool) *redactPlan {
	index := map[protoreflect.FullName]int{root.FullName(): 0}
	plans := []*redactPlan{{md: root}}
	for i := 0; i < len(plans); i++ {
		md := plans[i].md
		plans[i].extensible = md.ExtensionRanges().Len() > 0
		fields := md.Fields()
		for j := 0; j < fields.Len(); j++ {
			target := fieldMessage(fields.Get(j))
			if target == nil {
				continue
			}
			if _, ok := index[target.FullName()]; !ok {
				index[target.FullName()] = len(plans)
				plans = append(plans, &redactPlan{md: target})
			}
		}
	}
	for _, p := range plans {
		fields := p.md.Fields()
		for j := 0; j < fields.Len(); j++ {
			fd := fields.Get(j)
			switch {
			case r.isSecretField(fd):
				p.steps = append(p.steps, redactStep{fd: fd, act: redactAll, cleared: !redactsToText(fd)})
				p.secret = true
			case r.isContextField(fd):
				p.steps = append(p.steps, redactStep{fd: fd, act: redactContext})
				p.secret = true
			case fieldMessage(fd) != nil:
				next := plans[index[fieldMessage(fd).FullName()]]
				p.steps = append(p.steps, redactStep{fd: fd, act: redactDescend, next: next})
			}
		}
	}
	for _, p := range plans {
		fields := p.md.Fields()
		p.fields = make([]protoreflect.FieldDescriptor, fields.Len())
		p.byIndex = make([]*redactStep, fields.Len())
		p.jsonKeys = make([]string, fields.Len())
		for i := range fields.Len() {
			p.fields[i] = fields.Get(i)
			p.jsonKeys[i] = string(appendJSONString(nil, p.fields[i].JSONName())) + ":"
		}
		for i := range p.steps {
			p.byIndex[p.steps[i].fd.Index()] = &p.steps[i]
		}
		p.gs = protoread.NewStruct(p.md)
		p.wellKnown = p.md.ParentFile() != nil && p.md.ParentFile().Package() == "google.protobuf"
	}
	for changed := true; changed; {
		changed = false
		for _, p := range plans {
			for _, s := range p.steps {
				if !p.secret && s.act == redactDescend && s.next.secret {
					p.secret, changed = true, true
				}
			}
		}
	}
	if !store {
		return plans[0]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cached := map[protoreflect.FullName]*redactPlan{}
	if old := r.plans.Load(); old != nil {
		cached = maps.Clone(*old)
	}
	for _, p := range plans {
		if _, ok := cached[p.md.FullName()]; !ok {
			cached[p.md.FullName()] = p
		}
	}
	r.plans.Store(&cached)
	if p := cached[root.FullName()]; p.md == root {
		return p
	}
	return plans[0]
}

// redactsToText reports whether Redact replaces the values of the secret field fd by
// RedactedValue (text) rather than clearing it.
func redactsToText(fd protoreflect.FieldDescriptor) bool {
	if fd.IsMap() {
		return isText(fd.MapValue())
	}
	return isText(fd)
}

// fieldMessage returns the message type a field holds (singular, repeated or as map value),
// or nil.
func fieldMessage(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		return fd.MapValue().Message()
	}
	return fd.Message()
}

func (r *Redactor) isSecretField(fd protoreflect.FieldDescriptor) bool {
	return r.cfg.secretFields[fd.FullName()] || backends.HasSecretOption(fd)
}

func (r *Redactor) isContextField(fd protoreflect.FieldDescriptor) bool {
	return fd.IsMap() && fd.MapValue().Kind() == protoreflect.StringKind &&
		(r.cfg.contextFields[fd.Name()] || r.cfg.contextFullNames[fd.FullName()])
}
