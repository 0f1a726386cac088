package csispec

import (
	"maps"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxDNSLabelChars bounds the plugin name and each part of a topology key or value.
const maxDNSLabelChars = 63

// messageHooks check the rules of one message type that go beyond required fields and sizes.
// The checker runs them wherever the type appears, in requests and in answers, at the message
// (c.at names its fields).
var messageHooks = map[protoreflect.FullName]messageHook{
	"csi.v1.VolumeCapability":            hookOf(checkVolumeCapability),
	"csi.v1.VolumeCapability.AccessMode": hookOf(checkAccessMode),
	"csi.v1.VolumeContentSource":         hookOf(checkContentSource),
	"csi.v1.CapacityRange":               hookOf(checkCapacityRange),
	"csi.v1.TopologyRequirement":         hookOf(checkTopologyRequirement),
	"csi.v1.Topology":                    hookOf(checkTopology),
	"csi.v1.GetPluginInfoResponse":       hookOf(checkPluginName),
}

// messageHook checks one message of the type it is registered for.
type messageHook func(c *checker, m protoreflect.Message)

// hookOf adapts a check of one generated message type to a messageHook. A message of that
// type that is not the generated Go type (a dynamic message) is not checked by it.
func hookOf[T proto.Message](check func(c *checker, m T)) messageHook {
	return func(c *checker, m protoreflect.Message) {
		if t, ok := m.Interface().(T); ok {
			check(c, t)
		}
	}
}

// checkVolumeCapability: exactly one access type (block or mount). access_mode is in
// requiredFields; its mode is checkAccessMode's.
func checkVolumeCapability(c *checker, vc *csi.VolumeCapability) {
	if vc.GetAccessType() == nil {
		c.add("%s is required: set block or mount", c.at("access_type"))
	}
}

// checkAccessMode: the mode is REQUIRED, and UNKNOWN is what a missing mode decodes to. Modes
// the gateway does not know (a newer spec's) pass.
func checkAccessMode(c *checker, am *csi.VolumeCapability_AccessMode) {
	if am.GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN {
		c.add("%s is required (UNKNOWN is not an access mode)", c.at("mode"))
	}
}

// checkContentSource: exactly one of snapshot and volume; their IDs are in requiredFields.
func checkContentSource(c *checker, cs *csi.VolumeContentSource) {
	if cs.GetType() == nil {
		c.add("%s must name a snapshot or a volume", c.at(""))
	}
}

// checkCapacityRange: at least one bound, and required ≤ limit when both are set. Zero means
// unset (spec), negative values are the nonNegative table's.
func checkCapacityRange(c *checker, cr *csi.CapacityRange) {
	req, lim := cr.GetRequiredBytes(), cr.GetLimitBytes()
	switch {
	case req == 0 && lim == 0:
		c.add("%s must set required_bytes or limit_bytes (or be left out)", c.at(""))
	case req > 0 && lim > 0 && lim < req:
		c.add("%s is %d, less than %s (%d)", c.at("limit_bytes"), lim, c.at("required_bytes"), req)
	}
}

// checkTopologyRequirement: with requisite, every preferred topology is one of the requisite
// ones. A requirement with neither is taken for no requirement at all (see emptyTopology).
func checkTopologyRequirement(c *checker, tr *csi.TopologyRequirement) {
	if len(tr.GetRequisite()) == 0 {
		return
	}
	requisite := make(map[string]bool, len(tr.GetRequisite()))
	for _, t := range tr.GetRequisite() {
		requisite[topologyKey(t.GetSegments())] = true
	}
	for i, t := range tr.GetPreferred() {
		if !requisite[topologyKey(t.GetSegments())] {
			c.add("%s[%d] is not in %s; every preferred topology must also be requisite", c.at("preferred"), i, c.at("requisite"))
			return
		}
	}
}

// hasTopologyRequirement reports whether tr requires anything. The spec says a requirement
// sets requisite or preferred, but Nomad 1.9 sends an empty one for a volume without a
// topology_request; it constrains nothing, so the gateway treats it as absent rather than
// refuse every such CreateVolume.
func hasTopologyRequirement(tr *csi.TopologyRequirement) bool {
	return len(tr.GetRequisite()) > 0 || len(tr.GetPreferred()) > 0
}

// topologyKey is a canonical form of a segments map, to compare topologies in a set.
func topologyKey(segments map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(segments)) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(segments[k])
		b.WriteByte(0)
	}
	return b.String()
}

// checkTopology: key and value formats, and no two keys that differ only in case. The keys
// and values are named in the message: topology is not secret, and naming them is the only
// way to say which one is wrong.
func checkTopology(c *checker, t *csi.Topology) {
	segments := t.GetSegments()
	var buf [8]string // topologies have a handful of keys: sort them without allocating
	keys := buf[:0]
	for k := range segments {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Keys already in lower case are distinct from each other as they are: the set of
	// lowered keys is only needed from the first key that is not.
	var seen map[string]bool
	for i, k := range keys {
		if why := topologyKeyProblem(k); why != "" {
			c.add("%s: key %.80q %s", c.at("segments"), k, why)
		}
		if !isTopologyWord(segments[k], true) {
			c.add("%s: the value of key %.80q must be 1 to 63 characters, alphanumerics at both ends and '-', '_', '.' or alphanumerics between", c.at("segments"), k)
		}
		lower := strings.ToLower(k)
		if lower == k && seen == nil {
			continue
		}
		if seen == nil {
			seen = make(map[string]bool, len(keys))
			for _, prev := range keys[:i] {
				seen[prev] = true
			}
		}
		if seen[lower] {
			c.add("%s: keys %.80q and another differ only in case; topology keys are case-insensitive", c.at("segments"), k)
		}
		seen[lower] = true
	}
}

// topologyKeyProblem says what is wrong with a topology key ("" when nothing): an optional
// DNS prefix of lower-case alphanumerics, '-' and '.', a slash, and a name like a value.
func topologyKeyProblem(key string) string {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, name = "", key
	}
	switch {
	case hasPrefix && !isDNSName(prefix, true):
		return "has a prefix that is not a lower-case domain name of at most 63 characters"
	case !isTopologyWord(name, true):
		return "has a name that is not 1 to 63 characters, alphanumerics at both ends and '-', '_', '.' or alphanumerics between"
	}
	return ""
}

// isTopologyWord: 1 to 63 characters, alphanumeric at both ends, '-', '_', '.' or
// alphanumerics between (a topology key name or value).
func isTopologyWord(s string, underscore bool) bool {
	if len(s) == 0 || len(s) > maxDNSLabelChars || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '-' && b != '.' && (!underscore || b != '_') {
			return false
		}
	}
	return true
}

// isDNSName: 1 to 63 characters, alphanumeric at both ends, '-', '.' or alphanumerics
// between; lower-case only when lower is set (a topology prefix; the plugin name may mix).
func isDNSName(s string, lower bool) bool {
	if !isTopologyWord(s, false) {
		return false
	}
	return !lower || strings.ToLower(s) == s
}

func isAlnum(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// checkPluginName: domain name notation, at most 63 characters, alphanumerics at both ends
// and '-', '.' or alphanumerics between (v1; no underscore).
func checkPluginName(c *checker, info *csi.GetPluginInfoResponse) {
	if info.GetName() != "" && !isDNSName(info.GetName(), false) {
		c.add("%s is not a plugin name: at most 63 characters, alphanumerics at both ends and '-', '.' or alphanumerics between (%d bytes given)",
			c.at("name"), len(info.GetName()))
	}
}

// bannedRune returns the first character of s that CSI bans from CO-generated names:
// U+0000–U+0008, U+000B, U+000C, U+000E–U+001F, U+007F–U+009F.
func bannedRune(s string) (rune, bool) {
	for _, r := range s {
		if r <= 0x08 || r == 0x0B || r == 0x0C || (r >= 0x0E && r <= 0x1F) || (r >= 0x7F && r <= 0x9F) {
			return r, true
		}
	}
	return 0, false
}

// isSecretKey: a secrets key is made of alphanumerics, '-', '_' and '.' (spec, Secrets
// Requirements); the empty key is not.
func isSecretKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if b := k[i]; !isAlnum(b) && b != '-' && b != '_' && b != '.' {
			return false
		}
	}
	return true
}
