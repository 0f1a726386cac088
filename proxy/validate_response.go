package proxy

import (
	"strconv"

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

// responseCode is the code a caller gets for a malformed answer to method: UNAVAILABLE for
// the create methods (see createMethods), INTERNAL for every other (retrying a read, a publish
// or an expansion gets the same malformed answer; INTERNAL says so, and the sidecars that
// retry those anyway, the attacher and the resizer, still do).
func responseCode(method string) codes.Code {
	if createMethods[method] {
		return codes.Unavailable
	}
	return codes.Internal
}

// checkAnswer checks the rules of an answer that involve the request or the capabilities, on
// top of what the checker finds in the answer alone.
func checkAnswer(c *checker, method string, req, resp proto.Message, caps capView) {
	topology := pluginCap(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	// unadvertisedTopology reports whether v has a topology the backend does not advertise;
	// the field naming v is only rendered for a violation.
	unadvertisedTopology := func(v *csi.Volume) bool {
		return len(v.GetAccessibleTopology()) > 0 && caps.lacks(topology.kind, topology.cap)
	}
	const topologyProblem = "%s.accessible_topology is set but the backend does not advertise the %s"
	switch r := resp.(type) {
	case *csi.CreateVolumeResponse:
		if unadvertisedTopology(r.GetVolume()) {
			c.add(topologyProblem, "volume", topology)
		}
		q, _ := req.(*csi.CreateVolumeRequest)
		size, want, limit := r.GetVolume().GetCapacityBytes(), q.GetCapacityRange().GetRequiredBytes(), q.GetCapacityRange().GetLimitBytes()
		switch { // 0 means unknown
		case size > 0 && want > 0 && size < want:
			c.add("volume.capacity_bytes is %d, less than the required_bytes %d asked for", size, want)
		case size > 0 && limit > 0 && size > limit:
			c.add("volume.capacity_bytes is %d, more than the limit_bytes %d asked for", size, limit)
		}
	case *csi.ControllerGetVolumeResponse:
		if unadvertisedTopology(r.GetVolume()) {
			c.add(topologyProblem, "volume", topology)
		}
	case *csi.ListVolumesResponse:
		q, _ := req.(*csi.ListVolumesRequest)
		checkPage(c, len(r.GetEntries()), q.GetMaxEntries())
		published := ctrlCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES)
		for i, e := range r.GetEntries() {
			if c.full() {
				break
			}
			if unadvertisedTopology(e.GetVolume()) {
				c.add(topologyProblem, entryField(i, "volume"), topology)
			}
			if e.GetStatus() == nil {
				if has, _ := caps.has(published.kind, published.cap); has {
					c.add("%s is required: the backend advertises the %s", entryField(i, "status"), published)
				}
			}
		}
	case *csi.ListSnapshotsResponse:
		q, _ := req.(*csi.ListSnapshotsRequest)
		checkPage(c, len(r.GetEntries()), q.GetMaxEntries())
	case *csi.ControllerListVolumeHealthResponse:
		q, _ := req.(*csi.ControllerListVolumeHealthRequest)
		checkPage(c, len(r.GetEntries()), q.GetMaxEntries())
	case *volumegroup.ListVolumeGroupsResponse:
		q, _ := req.(*volumegroup.ListVolumeGroupsRequest)
		checkPage(c, len(r.GetEntries()), q.GetMaxEntries())
	case *csi.CreateSnapshotResponse:
		q, _ := req.(*csi.CreateSnapshotRequest)
		if got, want := r.GetSnapshot().GetSourceVolumeId(), q.GetSourceVolumeId(); got != "" && want != "" && got != want {
			c.add("snapshot.source_volume_id is not the source_volume_id asked for")
		}
	case *csi.NodeGetInfoResponse:
		if r.GetAccessibleTopology() != nil && caps.lacks(topology.kind, topology.cap) {
			c.add("accessible_topology is set but the backend does not advertise the %s", topology)
		}
	}
}

// checkPage: a page holds at most max_entries entries when max_entries is set.
func checkPage(c *checker, n int, maxEntries int32) {
	if maxEntries > 0 && n > int(maxEntries) {
		c.add("entries holds %d entries, more than the max_entries %d asked for", n, maxEntries)
	}
}

func entryField(i int, name string) string {
	return "entries[" + strconv.Itoa(i) + "]." + name
}
