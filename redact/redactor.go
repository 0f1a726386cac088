package redact

import (
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/internal/protoread"
)

// RedactedValue replaces every secret value in the copies returned by Redactor.Redact.
const RedactedValue = "***stripped***"

// Option configures a Redactor built by NewRedactor.
type Option func(*redactConfig)

type redactConfig struct {
	// secretFields are secret although no option marks them, by full field name.
	secretFields map[protoreflect.FullName]bool
	// contextFields are the names (in any message) of string maps whose values are secret
	// unless their key is in safeContextKeys; contextFullNames are more such maps, by full name.
	contextFields    map[protoreflect.Name]bool
	contextFullNames map[protoreflect.FullName]bool
	safeContextKeys  map[string]bool
}

// WithSafeContextKeys names volume_context, publish_context and volume_group_context keys
// whose values are not secret: Redact keeps them and SecretValues leaves them out. Keys match
// exactly (case-sensitive). The default is none: every context value is treated as secret,
// because drivers put CHAP passwords and tokens there (Kubernetes puts service account tokens
// under "csi.storage.k8s.io/serviceAccount.tokens").
func WithSafeContextKeys(keys ...string) Option {
	return func(c *redactConfig) {
		for _, k := range keys {
			c.safeContextKeys[k] = true
		}
	}
}

// WithSecretFields marks more fields as secret by full name, e.g.
// "vendor.v1.AttachRequest.credentials", for protos that carry secrets without an option
// marker (services loaded from descriptor sets). It adds to the built-in list (which names
// CSI v0's secrets); it cannot unmark a field.
func WithSecretFields(names ...protoreflect.FullName) Option {
	return func(c *redactConfig) {
		for _, n := range names {
			c.secretFields[n] = true
		}
	}
}

// Redactor removes secrets from protobuf messages by schema: a field is secret when it carries
// the csi_secret option (or the VolumeGroup proposal's vg_csi_secret), when the spec calls it
// sensitive without marking it (csi.v1.VolumeCapability.MountVolume.mount_flags, and every
// secret of CSI v0, which has no marker: spec_fields.go), or when it is a volume_context,
// publish_context or volume_group_context map or one of v0's attributes and publish_info maps
// (values only, minus safe keys).
// Nested messages, repeated messages and map<_, Message> values are followed to any depth, so
// new messages are covered without code.
//
// The schema of each message type is walked once, on first use, and compiled into a plan that
// is cached. A Redactor is safe for concurrent use; the zero value is not usable, use
// NewRedactor.
type Redactor struct {
	cfg redactConfig
	// plans maps full names to compiled plans. It is replaced, never modified, so that
	// lookups (one per call) take no lock; mu serializes the replacing.
	plans atomic.Pointer[map[protoreflect.FullName]*redactPlan]
	mu    sync.Mutex
}

// NewRedactor returns a Redactor with the built-in sensitive fields and the given options.
func NewRedactor(opts ...Option) *Redactor {
	cfg := redactConfig{
		secretFields:     map[protoreflect.FullName]bool{},
		contextFields:    map[protoreflect.Name]bool{},
		contextFullNames: map[protoreflect.FullName]bool{},
		safeContextKeys:  map[string]bool{},
	}
	for _, n := range specSecretFields {
		cfg.secretFields[n] = true
	}
	for _, n := range specContextFieldNames {
		cfg.contextFields[n] = true
	}
	for _, n := range specContextFields {
		cfg.contextFullNames[n] = true
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
	out := make([]string, 0, 8)
	r.collect(rm, p, &out)
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
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

// minContextScrubLen is the shortest volume_context / publish_context value SecretValues
// returns for scrubbing; CHAP secrets, the reason context values are secret, are 12 to 16
// bytes long.
const minContextScrubLen = 8

// collect appends the non-empty secret values of m to out, following p only where it leads to
// secrets. It only reads m; map<string, string> fields are read from the generated struct
// (p.gs), as protoreflect's map access allocates for every entry.
func (r *Redactor) collect(m protoreflect.Message, p *redactPlan, out *[]string) {
	for i := range p.steps {
		s := &p.steps[i]
		if (s.act == redactDescend && !s.next.secret) || !m.Has(s.fd) {
			continue
		}
		switch s.act {
		case redactAll:
			if protoread.IsStringMap(s.fd) { // read from the struct: no protoreflect map to build
				for _, mv := range p.gs.StringMap(m, s.fd) {
					appendText(out, s.fd.MapValue(), protoreflect.ValueOfString(mv))
				}
				continue
			}
			switch v := m.Get(s.fd); {
			case s.fd.IsMap():
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					appendText(out, s.fd.MapValue(), mv)
					return true
				})
			case s.fd.IsList():
				for i := 0; i < v.List().Len(); i++ {
					appendText(out, s.fd, v.List().Get(i))
				}
			default:
				appendText(out, s.fd, v)
			}
		case redactContext:
			for k, v := range p.gs.StringMap(m, s.fd) {
				// Short context values ("true", "ext4", a zone) are ordinary words: scrubbing
				// them from every message would garble logs and errors. They are still
				// redacted by schema; only long, secret-like values are also scrubbed.
				if !r.cfg.safeContextKeys[k] && len(v) >= minContextScrubLen {
					*out = append(*out, v)
				}
			}
		case redactDescend:
			switch v := m.Get(s.fd); {
			case s.fd.IsMap():
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					r.collect(mv.Message(), s.next, out)
					return true
				})
			case s.fd.IsList():
				for i := 0; i < v.List().Len(); i++ {
					r.collect(v.List().Get(i).Message(), s.next, out)
				}
			default:
				r.collect(v.Message(), s.next, out)
			}
		}
	}
}

// appendText appends v, a value of fd's kind, to out when it is a non-empty string or bytes.
func appendText(out *[]string, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
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
