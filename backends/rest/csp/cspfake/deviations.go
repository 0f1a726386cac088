package cspfake

import (
	"slices"
	"strconv"
)

// deviation is one entry of our written list of places where real CSP traffic may
// differ from openapi.yaml (CSP-MAPPING §1.6). openapi.yaml itself stays unmodified.
type deviation struct {
	ops       []string // operationIds
	direction string   // "request" or "response"
	pointer   string   // JSON pointer, "*" for any array index; "" for the whole body
	rule      string   // kin-openapi schema field ("type", ...) or one of our rules
	allow     func(value any) bool
	why       string
}

var deviations = []deviation{
	{
		ops: []string{"createVolume", "editVolume"}, direction: "request", pointer: "/size", rule: "type",
		allow: isNumericString,
		why:   "§1.6 #7: spec.md's create example sends size as a numeric string; the schema says int64",
	},
	{
		ops: []string{"publishVolume"}, direction: "response", pointer: "/chap_user", rule: ruleUnknownProperty,
		why: "§1.6 #1: spec.md requires CHAP in the answer when the host has it; openapi.yaml omits it",
	},
	{
		ops: []string{"publishVolume"}, direction: "response", pointer: "/chap_password", rule: ruleUnknownProperty,
		why: "§1.6 #1, as chap_user",
	},
	{
		ops: []string{"publishVolume"}, direction: "response", pointer: "/PeerArrayDetails", rule: ruleUnknownProperty,
		why: "§1.6 #1: spec.md's per-peer details for replicated volumes",
	},
	{
		ops: []string{"unpublishVolume"}, direction: "response", rule: ruleEmptyBody,
		why: "§1.6 #2: spec.md says 204 No Content; openapi.yaml declares a PublishInfo body",
	},
	{
		ops: []string{"createSnapshot", "getSnapshot"}, direction: "response", pointer: "/in_use", rule: ruleUnknownProperty,
		why: "§1.3: not in either spec, but the HPE model reads in_use (hpe profile)",
	},
	{
		ops: []string{"getSnapshots"}, direction: "response", pointer: "/*/in_use", rule: ruleUnknownProperty,
		why: "§1.3, as for one snapshot",
	},
	{
		ops: []string{"createSnapshotGroup", "getSnapshotGroup"}, direction: "response", pointer: "/snapshots/*/in_use", rule: ruleUnknownProperty,
		why: "§1.3, member snapshots",
	},
	{
		ops: []string{"getSnapshotGroups"}, direction: "response", pointer: "/*/snapshots/*/in_use", rule: ruleUnknownProperty,
		why: "§1.3, member snapshots",
	},
}

// forgiven reports whether the deviation list allows the finding.
func forgiven(op, direction string, fd finding) bool {
	for _, d := range deviations {
		if d.direction == direction && d.pointer == fd.pointer && d.rule == fd.rule && slices.Contains(d.ops, op) &&
			(d.allow == nil || d.allow(fd.value)) {
			return true
		}
	}
	return false
}

func isNumericString(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}
