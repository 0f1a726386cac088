package proxy

import (
	"slices"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// RedactedValue replaces every secret value in the copies returned by Redactor.Redact.
const RedactedValue = "***stripped***"

// Field numbers of the FieldOptions extensions that mark a field as secret. csi.v1.csi_secret
// is also what the csi-addons protos use; vg_csi_secret is the marker of the VolumeGroup
// proposal (spec REQUIREMENTS §4.1), which no Go package registers.
const (
	csiSecretOption   protowire.Number = 1059
	vgCSISecretOption protowire.Number = 1101
)

// RedactOption configures a Redactor built by NewRedactor.
type RedactOption func(*redactConfig)

type redactConfig struct {
	// secretFields are secret although no option marks them, by full field name.
	secretFields map[protoreflect.FullName]bool
	// contextFields are the names (in any message) of string maps whose values are secret
	// unless their key is in safeContextKeys.
	contextFields   map[protoreflect.Name]bool
	safeContextKeys map[string]bool
}

// WithSafeContextKeys names volume_context, publish_context and volume_group_context keys
// whose values are not secret: Redact keeps them and SecretValues leaves them out. Keys match
// exactly (case-sensitive). The default is none: every context value is treated as secret,
// because drivers put CHAP passwords and tokens there (Kubernetes puts service account tokens
// under "csi.storage.k8s.io/serviceAccount.tokens").
func WithSafeContextKeys(keys ...string) RedactOption {
	return func(c *redactConfig) {
		for _, k := range keys {
			c.safeContextKeys[k] = true
		}
	}
}

// WithSecretFields marks more fields as secret by full name, e.g.
// "csi.v0.CreateVolumeRequest.controller_create_secrets" for protos that carry secrets without
// an option marker. It adds to the built-in list; it cannot unmark a field.
func WithSecretFields(names ...protoreflect.FullName) RedactOption {
	return func(c *redactConfig) {
		for _, n := range names {
			c.secretFields[n] = true
		}
	}
}

// Redactor removes secrets from protobuf messages by schema: a field is secret when it carries
// the csi_secret option (or the VolumeGroup proposal's vg_csi_secret), when the spec calls it
// sensitive without marking it (csi.v1.VolumeCapability.MountVolume.mount_flags), or when it is
// a volume_context, publish_context or volume_group_context map (values only, minus safe keys).
// Nested messages, repeated messages and map<_, Message> values are followed to any depth, so
// new messages are covered without code.
//
// The schema of each message type is walked once, on first use, and compiled into a plan that
// is cached. A Redactor is safe for concurrent use; the zero value is not usable, use
// NewRedactor.
type Redactor struct {
	cfg   redactConfig
	plans sync.Map // protoreflect.FullName -> *redactPlan
}

// NewRedactor returns a Redactor with the built-in sensitive fields and the given options.
func NewRedactor(opts ...RedactOption) *Redactor {
	cfg := redactConfig{
		secretFields: map[protoreflect.FullName]bool{
			// "mount_flags MAY contain sensitive information" (spec §CreateVolume), unmarked.
			"csi.v1.VolumeCapability.MountVolume.mount_flags": true,
		},
		contextFields: map[protoreflect.Name]bool{
			"volume_context":       true,
			"publish_context":      true,
			"volume_group_context": true,
		},
		safeContextKeys: map[string]bool{},
	}
	for _, o := range opts {
		o(&cfg)
	}
	return &Redactor{cfg: cfg}
}

// Redact returns a deep copy of m in which every secret value is replaced by RedactedValue:
// a string field's value, each element of a repeated string, and each value of a map (its key
// stays). Secret fields of other kinds (numbers, messages) are cleared. Unknown fields and
// extensions are dropped from the copy at every depth, since they could carry anything, such
// as a secret field of a newer spec version. m itself is never modified. Redact(nil) is nil.
//
// The copy is for logs and the `call` output, not for forwarding.
func (r *Redactor) Redact(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	out := proto.Clone(m)
	if rm := out.ProtoReflect(); rm.IsValid() {
		r.redactMessage(rm, r.planFor(rm.Descriptor()))
	}
	return out
}

// SecretValues returns the distinct, non-empty secret string values present in m (those
// Redact would replace), sorted, for scrubbing them from text the gateway emits about the
// call. It returns nil when there are none; it does not modify m.
func (r *Redactor) SecretValues(m proto.Message) []string {
	if m == nil {
		return nil
	}
	rm := m.ProtoReflect()
	if !rm.IsValid() {
		return nil
	}
	p := r.planFor(rm.Descriptor())
	if !p.secret {
		return nil
	}
	var out []string
	r.collect(rm, p, &out)
	slices.Sort(out)
	return slices.Compact(out)
}

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
}

// redactPlan is what Redact and SecretValues do to messages of one type. Every message-typed
// field has a step, because unknown fields are dropped at every depth. Plans are immutable
// once compiled and may form cycles (recursive messages).
type redactPlan struct {
	md         protoreflect.MessageDescriptor
	steps      []redactStep
	secret     bool // a secret is reachable from this type: SecretValues has work to do
	extensible bool // the type has extension ranges: populated extensions are cleared
}

// planFor returns the cached plan for md, compiling and caching it on first use. The cache is
// keyed by full name; a different descriptor with a cached name (say a dynamic descriptor of
// another spec version) gets a fresh, uncached plan so it is never redacted by the wrong schema.
func (r *Redactor) planFor(md protoreflect.MessageDescriptor) *redactPlan {
	if v, ok := r.plans.Load(md.FullName()); ok {
		if p := v.(*redactPlan); p.md == md {
			return p
		}
		return r.compile(md, false)
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
				p.steps = append(p.steps, redactStep{fd: fd, act: redactAll})
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
	for _, p := range plans[1:] {
		r.plans.LoadOrStore(p.md.FullName(), p)
	}
	if v, loaded := r.plans.LoadOrStore(root.FullName(), plans[0]); loaded && v.(*redactPlan).md == root {
		return v.(*redactPlan)
	}
	return plans[0]
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
	return r.cfg.secretFields[fd.FullName()] || hasSecretOption(fd)
}

func (r *Redactor) isContextField(fd protoreflect.FieldDescriptor) bool {
	return fd.IsMap() && fd.MapValue().Kind() == protoreflect.StringKind && r.cfg.contextFields[fd.Name()]
}

// hasSecretOption reports whether fd carries csi.v1.csi_secret (or vg_csi_secret) = true.
// Options decoded where the extension was not registered (descriptors built at run time, the
// VolumeGroup proposal) keep it as unknown bytes, so those are read too.
func hasSecretOption(fd protoreflect.FieldDescriptor) bool {
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
		if typ == protowire.VarintType && (num == csiSecretOption || num == vgCSISecretOption) {
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

// redactMessage applies p to m in place (m is Redact's private copy).
func (r *Redactor) redactMessage(m protoreflect.Message, p *redactPlan) {
	if len(m.GetUnknown()) > 0 {
		m.SetUnknown(nil)
	}
	if p.extensible {
		var exts []protoreflect.FieldDescriptor
		m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if fd.IsExtension() {
				exts = append(exts, fd)
			}
			return true
		})
		for _, fd := range exts {
			m.Clear(fd)
		}
	}
	for _, s := range p.steps {
		if !m.Has(s.fd) {
			continue
		}
		switch s.act {
		case redactAll:
			redactField(m, s.fd)
		case redactContext:
			mp := m.Mutable(s.fd).Map()
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				if !r.cfg.safeContextKeys[k.String()] {
					mp.Set(k, protoreflect.ValueOfString(RedactedValue))
				}
				return true
			})
		case redactDescend:
			eachMessage(m, s.fd, func(sub protoreflect.Message) { r.redactMessage(sub, s.next) })
		}
	}
}

// redactField replaces every value of a secret field by RedactedValue, or clears the field
// when its values are neither strings nor bytes.
func redactField(m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsMap():
		if !isText(fd.MapValue()) {
			m.Clear(fd)
			return
		}
		mp := m.Mutable(fd).Map()
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			mp.Set(k, redactedValue(fd.MapValue()))
			return true
		})
	case fd.IsList():
		if !isText(fd) {
			m.Clear(fd)
			return
		}
		l := m.Mutable(fd).List()
		for i := 0; i < l.Len(); i++ {
			l.Set(i, redactedValue(fd))
		}
	case isText(fd):
		m.Set(fd, redactedValue(fd))
	default:
		m.Clear(fd)
	}
}

func isText(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind
}

func redactedValue(fd protoreflect.FieldDescriptor) protoreflect.Value {
	if fd.Kind() == protoreflect.BytesKind {
		return protoreflect.ValueOfBytes([]byte(RedactedValue))
	}
	return protoreflect.ValueOfString(RedactedValue)
}

// eachMessage calls f for each message held by the populated message-typed field fd of m.
func eachMessage(m protoreflect.Message, fd protoreflect.FieldDescriptor, f func(protoreflect.Message)) {
	v := m.Get(fd)
	switch {
	case fd.IsMap():
		v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
			f(mv.Message())
			return true
		})
	case fd.IsList():
		l := v.List()
		for i := 0; i < l.Len(); i++ {
			f(l.Get(i).Message())
		}
	default:
		f(v.Message())
	}
}

// collect appends the non-empty secret values of m to out, following p only where it leads to
// secrets. It only reads m.
func (r *Redactor) collect(m protoreflect.Message, p *redactPlan, out *[]string) {
	add := func(fd protoreflect.FieldDescriptor, v protoreflect.Value) {
		var s string
		switch fd.Kind() {
		case protoreflect.StringKind:
			s = v.String()
		case protoreflect.BytesKind:
			s = string(v.Bytes())
		}
		if s != "" {
			*out = append(*out, s)
		}
	}
	for _, s := range p.steps {
		if !m.Has(s.fd) {
			continue
		}
		switch s.act {
		case redactAll:
			switch v := m.Get(s.fd); {
			case s.fd.IsMap():
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					add(s.fd.MapValue(), mv)
					return true
				})
			case s.fd.IsList():
				for i := 0; i < v.List().Len(); i++ {
					add(s.fd, v.List().Get(i))
				}
			default:
				add(s.fd, v)
			}
		case redactContext:
			m.Get(s.fd).Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if !r.cfg.safeContextKeys[k.String()] {
					add(s.fd.MapValue(), mv)
				}
				return true
			})
		case redactDescend:
			if s.next.secret {
				eachMessage(m, s.fd, func(sub protoreflect.Message) { r.collect(sub, s.next, out) })
			}
		}
	}
}
