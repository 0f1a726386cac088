package csispec

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/internal/protoread"
)

// side is which way a message travels: requests are the caller's, answers the backend's.
type side uint8

const (
	requestSide side = iota
	responseSide
)

// checker walks a message by reflection, following the rulePlan of each message type it
// meets, and collects the rules it breaks (at most MaxViolations). Every violation it records
// is INVALID_ARGUMENT; checkAnswer recodes those of an answer.
//
// Where it is in the message is kept as a stack of path elements, and rendered as a string
// ("volume_capabilities[0].access_mode") only for a violation: fields that pass cost no string.
type checker struct {
	side side
	out  []Violation
	path []pathElem
	buf  [8]pathElem // path's first backing array: CSI messages are rarely deeper
}

// pathElem is one step of the checker's path: a field, or (name "") element index of the list
// field before it.
type pathElem struct {
	name  protoreflect.Name
	index int
}

func newChecker(s side) *checker {
	c := &checker{side: s}
	c.path = c.buf[:0]
	return c
}

// check checks m and every message inside it.
func (c *checker) check(m protoreflect.Message) {
	c.message(m, reflect.Value{}, rulePlanFor(m.Descriptor()))
}

func (c *checker) add(format string, args ...any) {
	if len(c.out) < MaxViolations {
		c.out = append(c.out, Violation{codes.InvalidArgument, fmt.Sprintf(format, args...)})
	}
}

// full reports whether no more violations will be recorded, to stop walking early.
func (c *checker) full() bool { return len(c.out) >= MaxViolations }

func (c *checker) push(e pathElem) { c.path = append(c.path, e) }
func (c *checker) pop()            { c.path = c.path[:len(c.path)-1] }

// at names field name of the message or field the checker is at, or that message or field
// itself when name is "" ("the message" at the top): "volume_capabilities[0].access_mode".
func (c *checker) at(name protoreflect.Name) string {
	if len(c.path) == 0 && name == "" {
		return "the message"
	}
	var b strings.Builder
	for _, e := range c.path {
		if e.name == "" {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(string(e.name))
	}
	if name != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(string(name))
	}
	return b.String()
}

// message checks m, of the type p was compiled for, and every message inside it. gv is m's Go
// pointer when the caller has it (else the zero Value): the fields protoread.Struct knows are read
// from m's struct, the others through protoreflect.
func (c *checker) message(m protoreflect.Message, gv reflect.Value, p *rulePlan) {
	msg := planMessage{m: m, p: p}
	if gv.IsValid() {
		msg.sv, msg.byStruct = p.goMaps.OfGo(gv)
	} else {
		msg.sv, msg.byStruct = p.goMaps.Of(m)
	}
	for _, fd := range p.required {
		if !msg.has(fd) {
			c.add("%s is required", c.at(fd.Name()))
		}
	}
	for i := 0; i < len(p.fields) && !c.full(); i++ { // declaration order: deterministic messages
		if r := &p.fields[i]; msg.has(r.fd) {
			c.push(pathElem{name: r.fd.Name()})
			c.field(msg, r)
			c.pop()
		}
	}
	if p.hook != nil && !c.full() {
		p.hook(c, m)
	}
}

// planMessage is a message the checker is in, with the struct protoread.Struct reads it by.
type planMessage struct {
	m        protoreflect.Message
	p        *rulePlan
	sv       reflect.Value
	byStruct bool
}

// goField is how fd is read: from the struct, or (protoread.ByReflect) through protoreflect.
func (pm planMessage) goField(fd protoreflect.FieldDescriptor) (protoread.Kind, reflect.Value) {
	if pm.byStruct {
		if f := pm.p.goMaps.Field(fd.Index()); f.Kind != protoread.ByReflect {
			return f.Kind, pm.sv.Field(f.Index)
		}
	}
	return protoread.ByReflect, reflect.Value{}
}

// has reports whether fd is set, as protoreflect's Has does.
func (pm planMessage) has(fd protoreflect.FieldDescriptor) bool {
	if kind, fv := pm.goField(fd); kind != protoread.ByReflect {
		return protoread.IsSet(fv)
	}
	return pm.m.Has(fd)
}

// scalar is the value of the scalar field fd, read as goField found it.
func (pm planMessage) scalar(fd protoreflect.FieldDescriptor, kind protoread.Kind, fv reflect.Value) protoreflect.Value {
	if kind == protoread.ScalarKind {
		return protoread.ScalarValue(fd, fv)
	}
	return pm.m.Get(fd)
}

// field checks the populated field r of msg (the checker is at the field).
func (c *checker) field(msg planMessage, r *fieldRule) {
	kind, fv := msg.goField(r.fd)
	switch r.kind {
	case ruleString:
		c.str(r, msg.scalar(r.fd, kind, fv).String())
	case ruleNumber:
		if msg.scalar(r.fd, kind, fv).Int() < 0 {
			c.add("%s must not be negative", c.at(""))
		}
	case ruleMessage:
		var sub protoreflect.Message
		var gv reflect.Value
		if kind == protoread.MessageKind {
			sub, gv = protoread.MessageAt(fv), fv
		} else {
			sub = msg.m.Get(r.fd).Message()
		}
		if r.wrapped != nil && sub.Get(r.wrapped).Int() < 0 { // a wrapped number (google.protobuf.Int64Value)
			c.add("%s must not be negative", c.at(""))
		}
		c.message(sub, gv, r.next)
	case ruleMessageList:
		if kind == protoread.MessagesKind {
			for i := 0; i < fv.Len() && !c.full(); i++ {
				c.push(pathElem{index: i})
				ev := fv.Index(i)
				c.message(protoread.MessageAt(ev), ev, r.next)
				c.pop()
			}
			return
		}
		list := msg.m.Get(r.fd).List()
		for i := 0; i < list.Len() && !c.full(); i++ {
			c.push(pathElem{index: i})
			c.message(list.Get(i).Message(), reflect.Value{}, r.next)
			c.pop()
		}
	case ruleStringList, ruleMountFlags:
		var list protoreflect.List
		n := 0
		if kind == protoread.StringsKind {
			n = fv.Len()
		} else {
			list = msg.m.Get(r.fd).List()
			n = list.Len()
		}
		elem := func(i int) string {
			if kind == protoread.StringsKind {
				return fv.Index(i).String()
			}
			return list.Get(i).String()
		}
		if r.kind == ruleMountFlags {
			total := 0
			for i := range n {
				total += len(elem(i))
			}
			if total > maxMountFlagsBytes {
				c.add("%s hold %d bytes together; CSI allows at most %d", c.at(""), total, maxMountFlagsBytes)
			}
			return
		}
		for i := 0; i < n && !c.full(); i++ {
			c.push(pathElem{index: i})
			c.str(r, elem(i))
			c.pop()
		}
	case ruleStringMap:
		if kind == protoread.StringMapKind {
			c.stringMap(r, fv.Interface().(map[string]string)) // the struct's own map: read only
		} else {
			c.stringMap(r, msg.p.goMaps.StringMap(msg.m, r.fd))
		}
	}
}

// str checks one string: its size, and the format rules of paths and names.
func (c *checker) str(r *fieldRule, s string) {
	if limit := r.limits[c.side]; limit > 0 && len(s) > limit {
		c.add("%s is %d bytes long; CSI allows at most %d", c.at(""), len(s), limit)
	}
	switch {
	case r.absolute && !strings.HasPrefix(s, "/"):
		c.add("%s must be an absolute path", c.at(""))
	case r.coName:
		if ch, ok := bannedRune(s); ok {
			c.add("%s contains the control character U+%04X, which CSI forbids in names", c.at(""), ch)
		}
	}
}

// stringMap checks a map<string, string>: 4 KiB for keys and values together, and the key
// format of secrets. Secrets maps are exempt from the 4 KiB limit: they only carry
// credentials to the plugin (a CA bundle or kubeconfig easily exceeds 4 KiB), and the spec
// leaves open how the map limit applies to them (REQUIREMENTS §8 #12).
func (c *checker) stringMap(r *fieldRule, m map[string]string) {
	n, badKey := 0, false
	for k, v := range m {
		n += len(k) + len(v)
		if r.secrets && !isSecretKey(k) {
			badKey = true
		}
	}
	if !r.secrets && n > maxMapBytes {
		c.add("%s holds %d bytes (keys and values); CSI allows at most %d", c.at(""), n, maxMapBytes)
	}
	if badKey {
		c.add("%s has a key that is not made of alphanumerics, '-', '_' and '.'", c.at(""))
	}
}

// rulePlan is what the checker checks in messages of one type: the tables of
// rules.go looked up once per type, not for every field of every message. Plans
// are immutable once compiled and may form cycles (recursive messages).
type rulePlan struct {
	required []protoreflect.FieldDescriptor // requiredFields that the type has
	fields   []fieldRule                    // the fields with something to check
	hook     messageHook
	goMaps   protoread.Struct
}

// ruleKind is how the checker checks one field.
type ruleKind uint8

const (
	ruleString      ruleKind = iota + 1 // size and format
	ruleStringList                      // each element as ruleString
	ruleMountFlags                      // all elements' size together
	ruleMessage                         // walked; a wrapped number must not be negative
	ruleMessageList                     // each element walked
	ruleStringMap                       // size, and the key format of secrets
	ruleNumber                          // must not be negative
)

type fieldRule struct {
	fd       protoreflect.FieldDescriptor
	kind     ruleKind
	limits   [2]int                       // by side, the size limit of a string (0: none)
	absolute bool                         // a path that must be absolute
	coName   bool                         // a CO-generated name: no control characters
	secrets  bool                         // a secrets map: key format, no size limit
	wrapped  protoreflect.FieldDescriptor // ruleMessage: the value of a non-negative wrapped number
	next     *rulePlan                    // ruleMessage, ruleMessageList
}

// rulePlans caches the plan of every message type the checker has met, by descriptor. The
// tables it derives from never change, so one cache serves every validator.
var rulePlans sync.Map // protoreflect.MessageDescriptor -> *rulePlan

// rulePlanFor returns the plan of md, compiling it, and those of the types it leads to, on
// first use.
func rulePlanFor(md protoreflect.MessageDescriptor) *rulePlan {
	if p, ok := rulePlans.Load(md); ok {
		return p.(*rulePlan)
	}
	plans := map[protoreflect.MessageDescriptor]*rulePlan{}
	p := compileRules(md, plans)
	for d, dp := range plans {
		rulePlans.LoadOrStore(d, dp)
	}
	return p
}

// compileRules compiles the plan of md into plans, and those of the message types its
// checked fields hold.
func compileRules(md protoreflect.MessageDescriptor, plans map[protoreflect.MessageDescriptor]*rulePlan) *rulePlan {
	if p, ok := plans[md]; ok {
		return p
	}
	p := &rulePlan{hook: messageHooks[md.FullName()], goMaps: protoread.NewStruct(md)}
	plans[md] = p
	fields := md.Fields()
	for _, name := range requiredFields[md.FullName()] {
		if fd := fields.ByName(name); fd != nil {
			p.required = append(p.required, fd)
		}
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		r := fieldRule{fd: fd}
		isMessage := fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind
		switch name := fd.FullName(); {
		case fd.IsMap():
			if !protoread.IsStringMap(fd) {
				continue
			}
			r.kind, r.secrets = ruleStringMap, fd.Name() == "secrets"
		case fd.IsList() && name == mountFlagsField:
			r.kind = ruleMountFlags
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			r.kind = ruleStringList
		case fd.IsList() && isMessage:
			r.kind, r.next = ruleMessageList, compileRules(fd.Message(), plans)
		case fd.IsList():
			continue
		case isMessage:
			r.kind, r.next = ruleMessage, compileRules(fd.Message(), plans)
			if nonNegative[name] {
				r.wrapped = fd.Message().Fields().ByName("value")
			}
		case fd.Kind() == protoreflect.StringKind:
			r.kind = ruleString
		case nonNegative[name]:
			r.kind = ruleNumber
		default:
			continue
		}
		if fd.Kind() == protoreflect.StringKind {
			r.limits = stringLimits(fd)
			r.absolute = pathFields[fd.FullName()] && !relativeTolerated[fd.FullName()]
			r.coName = coNames[fd.FullName()]
		}
		p.fields = append(p.fields, r)
	}
	return p
}

// stringLimits is the size limit of a string field on each side. Answers are checked for IDs
// and tokens only (the caller hands those back to the gateway, which would then refuse them);
// free text such as messages is passed on.
func stringLimits(fd protoreflect.FieldDescriptor) [2]int {
	switch name := fd.FullName(); {
	case pathFields[name]:
		return [2]int{maxPathBytes, maxPathBytes}
	case nodeIDFields[name]:
		return [2]int{maxNodeIDBytes, maxNodeIDBytes}
	}
	var limits [2]int
	limits[requestSide] = maxStringBytes
	if n := string(fd.Name()); strings.HasSuffix(n, "_id") || strings.HasSuffix(n, "_ids") || strings.HasSuffix(n, "_token") {
		limits[responseSide] = maxStringBytes
	}
	return limits
}
