package csispec

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// createMethods make an object the backend names in its answer. When such an answer is
// malformed the object may exist all the same, so the caller gets UNAVAILABLE, not INTERNAL:
// the Kubernetes sidecars treat INTERNAL as final and stop retrying (a claim deleted meanwhile
// leaves the object behind), while on UNAVAILABLE they retry with the same name, which the
// spec makes idempotent, until the backend answers properly or says the object is gone.
var createMethods = setOf(
	"/csi.v1.Controller/CreateVolume",
	"/csi.v1.Controller/CreateSnapshot",
	"/csi.v1.GroupController/CreateVolumeGroupSnapshot",
	"/volumegroup.Controller/CreateVolumeGroup",
)

// ResponseCode is the code a caller gets for a malformed answer to method: UNAVAILABLE for
// the create methods (see createMethods), INTERNAL for every other (retrying a read, a publish
// or an expansion gets the same malformed answer; INTERNAL says so, and the sidecars that
// retry those anyway, the attacher and the resizer, still do).
func ResponseCode(method string) codes.Code {
	if createMethods[method] {
		return codes.Unavailable
	}
	return codes.Internal
}

// answerRule is one rule of an answer that involves the request or the backend's
// capabilities, on top of what the checker finds in the answer alone. check records what the
// answer breaks on c; each violation gets code, or ResponseCode's when code is OK (unset).
type answerRule struct {
	code  codes.Code
	check func(c *checker, req, resp proto.Message, caps backendCaps)
}

// answerOf adapts a check of one method's typed request and answer to an answerRule.
func answerOf[Req, Resp proto.Message](code codes.Code, check func(c *checker, req Req, resp Resp, caps backendCaps)) answerRule {
	return answerRule{code: code, check: func(c *checker, req, resp proto.Message, caps backendCaps) {
		q, okq := req.(Req)
		r, okr := resp.(Resp)
		if okq && okr {
			check(c, q, r, caps)
		}
	}}
}

// Incompatible is the code of a create whose answer names an object that does not match the
// request: the backend has an object of that name, and it is not the one asked for. That is
// the spec's "already exists but is Incompatible" (ALREADY_EXISTS: the caller must change the
// arguments or the name), not a malformed answer: a retry under the same name would get the
// same object, so UNAVAILABLE would be retried forever.
const Incompatible = codes.AlreadyExists

// answerRules are the answer rules of each method (see answerRule), in the order they are
// checked.
var answerRules = map[string][]answerRule{
	"/csi.v1.Controller/CreateVolume": {
		answerOf(codes.OK, func(c *checker, _ *csi.CreateVolumeRequest, r *csi.CreateVolumeResponse, caps backendCaps) {
			if unadvertisedTopology(r.GetVolume(), caps) {
				c.add(topologyUnadvertised, "volume", volumeTopology)
			}
		}),
		answerOf(Incompatible, func(c *checker, q *csi.CreateVolumeRequest, r *csi.CreateVolumeResponse, _ backendCaps) {
			atLeastRequired(c, "volume.capacity_bytes", r.GetVolume().GetCapacityBytes(), q.GetCapacityRange())
			atMostLimit(c, "volume.capacity_bytes", r.GetVolume().GetCapacityBytes(), q.GetCapacityRange())
		}),
		answerOf(Incompatible, func(c *checker, q *csi.CreateVolumeRequest, r *csi.CreateVolumeResponse, _ backendCaps) {
			withinRequisite(c, "volume.accessible_topology", r.GetVolume().GetAccessibleTopology(), q.GetAccessibilityRequirements())
		}),
	},
	"/csi.v1.Controller/ControllerGetVolume": {
		answerOf(codes.OK, func(c *checker, _ *csi.ControllerGetVolumeRequest, r *csi.ControllerGetVolumeResponse, caps backendCaps) {
			if unadvertisedTopology(r.GetVolume(), caps) {
				c.add(topologyUnadvertised, "volume", volumeTopology)
			}
		}),
	},
	"/csi.v1.Controller/ListVolumes": {
		answerOf(codes.OK, func(c *checker, q *csi.ListVolumesRequest, r *csi.ListVolumesResponse, caps backendCaps) {
			withinPage(c, len(r.GetEntries()), q.GetMaxEntries())
			checkVolumeEntries(c, r.GetEntries(), caps)
		}),
	},
	"/csi.v1.Controller/ListSnapshots": {
		answerOf(codes.OK, func(c *checker, q *csi.ListSnapshotsRequest, r *csi.ListSnapshotsResponse, _ backendCaps) {
			withinPage(c, len(r.GetEntries()), q.GetMaxEntries())
		}),
	},
	"/csi.v1.Controller/ControllerListVolumeHealth": {
		answerOf(codes.OK, func(c *checker, q *csi.ControllerListVolumeHealthRequest, r *csi.ControllerListVolumeHealthResponse, _ backendCaps) {
			withinPage(c, len(r.GetEntries()), q.GetMaxEntries())
		}),
	},
	"/volumegroup.Controller/ListVolumeGroups": {
		answerOf(codes.OK, func(c *checker, q *volumegroup.ListVolumeGroupsRequest, r *volumegroup.ListVolumeGroupsResponse, _ backendCaps) {
			withinPage(c, len(r.GetEntries()), q.GetMaxEntries())
		}),
	},
	"/csi.v1.Controller/CreateSnapshot": {
		answerOf(Incompatible, func(c *checker, q *csi.CreateSnapshotRequest, r *csi.CreateSnapshotResponse, _ backendCaps) {
			if got, want := r.GetSnapshot().GetSourceVolumeId(), q.GetSourceVolumeId(); got != "" && want != "" && got != want {
				c.add("snapshot.source_volume_id is not the source_volume_id asked for")
			}
		}),
	},
	// An expansion is checked against required_bytes only: a volume already larger than the
	// target is answered OK (spec, idempotency), with its capacity, which may exceed limit_bytes.
	"/csi.v1.Controller/ControllerExpandVolume": {
		answerOf(codes.OK, func(c *checker, q *csi.ControllerExpandVolumeRequest, r *csi.ControllerExpandVolumeResponse, _ backendCaps) {
			atLeastRequired(c, "capacity_bytes", r.GetCapacityBytes(), q.GetCapacityRange())
		}),
	},
	"/csi.v1.Node/NodeExpandVolume": {
		answerOf(codes.OK, func(c *checker, q *csi.NodeExpandVolumeRequest, r *csi.NodeExpandVolumeResponse, _ backendCaps) {
			atLeastRequired(c, "capacity_bytes", r.GetCapacityBytes(), q.GetCapacityRange())
		}),
	},
	"/csi.v1.Node/NodeGetInfo": {
		answerOf(codes.OK, func(c *checker, _ *csi.NodeGetInfoRequest, r *csi.NodeGetInfoResponse, caps backendCaps) {
			if r.GetAccessibleTopology() != nil && caps.lacks(volumeTopology.Kind, volumeTopology.Cap) {
				c.add("accessible_topology is set but the backend does not advertise the %s", volumeTopology)
			}
		}),
	},
}

// checkAnswer records on c the answer rules of method that resp, the answer to req, breaks,
// each with its code; the violations c already holds get ResponseCode's.
func checkAnswer(c *checker, method string, req, resp proto.Message, caps backendCaps) {
	code := ResponseCode(method)
	recode := func(from int, to codes.Code) {
		for i := from; i < len(c.out); i++ {
			c.out[i].Code = to
		}
	}
	recode(0, code)
	for _, r := range answerRules[method] {
		if c.full() {
			return
		}
		n := len(c.out)
		r.check(c, req, resp, caps)
		recode(n, cmp.Or(r.code, code))
	}
}

// unadvertisedTopology reports whether v has an accessible_topology from a backend that
// does not advertise VOLUME_ACCESSIBILITY_CONSTRAINTS (topologyUnadvertised says so, naming v).
func unadvertisedTopology(v *csi.Volume, caps backendCaps) bool {
	return len(v.GetAccessibleTopology()) > 0 && caps.lacks(volumeTopology.Kind, volumeTopology.Cap)
}

const topologyUnadvertised = "%s.accessible_topology is set but the backend does not advertise the %s"

// checkVolumeEntries: ListVolumes entries with topology only as advertised, and a status
// when the backend advertises LIST_VOLUMES_PUBLISHED_NODES.
func checkVolumeEntries(c *checker, entries []*csi.ListVolumesResponse_Entry, caps backendCaps) {
	published := ControllerCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES)
	for i, e := range entries {
		if c.full() {
			return
		}
		if unadvertisedTopology(e.GetVolume(), caps) {
			c.add(topologyUnadvertised, entryField(i, "volume"), volumeTopology) // the field is rendered for a violation only
		}
		if e.GetStatus() == nil {
			if has, _ := caps.has(published.Kind, published.Cap); has {
				c.add("%s is required: the backend advertises the %s", entryField(i, "status"), published)
			}
		}
	}
}

// withinPage: a page holds at most max_entries entries when max_entries is set.
func withinPage(c *checker, n int, maxEntries int32) {
	if maxEntries > 0 && n > int(maxEntries) {
		c.add("entries holds %d entries, more than the max_entries %d asked for", n, maxEntries)
	}
}

// atLeastRequired: a capacity the backend reports (field; 0 means unknown) is not below the
// required_bytes of cr, when that is set.
func atLeastRequired(c *checker, field string, size int64, cr *csi.CapacityRange) {
	if want := cr.GetRequiredBytes(); size > 0 && want > 0 && size < want {
		c.add("%s is %d, less than the required_bytes %d asked for", field, size, want)
	}
}

// atMostLimit: a capacity the backend reports (field; 0 means unknown) is not above the
// limit_bytes of cr, when that is set.
func atMostLimit(c *checker, field string, size int64, cr *csi.CapacityRange) {
	if limit := cr.GetLimitBytes(); size > 0 && limit > 0 && size > limit {
		c.add("%s is %d, more than the limit_bytes %d asked for", field, size, limit)
	}
}

// withinRequisite: when the request lists requisite topologies, "the provisioned volume MUST
// be accessible from at least one of the requisite topologies" (spec, TopologyRequirement).
// The gateway refuses only what it can prove: an answer none of whose topologies (field) can
// hold any requisite one, each contradicting each on a key both name. A topology with fewer
// keys (a region-wide volume, {region: r1}, for a requisite {region: r1, zone: z1}) or more
// (a rack within the zone) is accessible from the requisite one, or from part of it; an
// answer with no topology is accessible from everywhere (spec, Volume.accessible_topology).
// preferred alone imposes nothing: the plugin MAY choose any topology then.
func withinRequisite(c *checker, field string, got []*csi.Topology, tr *csi.TopologyRequirement) {
	requisite := tr.GetRequisite()
	if len(requisite) == 0 || len(got) == 0 {
		return
	}
	for _, t := range got {
		for _, want := range requisite {
			if !contradicts(t.GetSegments(), want.GetSegments()) {
				return
			}
		}
	}
	c.add("%s %s is outside accessibility_requirements.requisite %s: the volume must be accessible from at least one requisite topology",
		field, describeTopologies(got), describeTopologies(requisite))
}

// contradicts reports whether topologies a and b name one key (keys are case-insensitive,
// spec) with different values: no node can be in both.
func contradicts(a, b map[string]string) bool {
	for ka, va := range a {
		for kb, vb := range b {
			if strings.EqualFold(ka, kb) && va != vb {
				return true
			}
		}
	}
	return false
}

// maxTopologiesShown bounds the topologies a message names.
const maxTopologiesShown = 3

// describeTopologies renders topologies for a message: {"region"="r1","zone"="z9"}
// {"zone"="z2"} and N more. Topology is not secret (see checkTopology); keys and values are
// quoted and cut as checkTopology's are.
func describeTopologies(ts []*csi.Topology) string {
	var b strings.Builder
	for i, t := range ts {
		if i == maxTopologiesShown {
			b.WriteString(" and " + strconv.Itoa(len(ts)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('{')
		for j, k := range slices.Sorted(maps.Keys(t.GetSegments())) {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%.80q=%.63q", k, t.GetSegments()[k])
		}
		b.WriteByte('}')
	}
	return b.String()
}

func entryField(i int, name string) string {
	return "entries[" + strconv.Itoa(i) + "]." + name
}
