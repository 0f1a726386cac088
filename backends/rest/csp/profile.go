package csp

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// profile is what one kind of CSP implementation can do, and the quirks the backend must
// survive (CSP-MAPPING §2 "Capabilities a csp backend can advertise", §3, §5).
type profile struct {
	name string
	// listVolumes: GET /volumes without a name lists every volume (truenas-csp answers an
	// empty 200 instead, so listing would be a wrong answer).
	listVolumes bool
	// listAllSnapshots: every snapshot can be listed, through GET /volumes and GET
	// /snapshots?volume_id= (not on truenas-csp, which cannot list volumes).
	listAllSnapshots bool
	// groups: the volume_groups and snapshot_groups routes exist.
	groups bool
	// modify: PUT /volumes/{id} accepts config changes.
	modify bool
	// emptyNotFoundOnDelete: a 404 with an empty body on DELETE means absent (truenas-csp).
	emptyNotFoundOnDelete bool
	// verifySnapshotDelete: a 204 for a snapshot delete may not mean it happened
	// (truenas-csp answers 204 and keeps a snapshot that has clones): look again.
	verifySnapshotDelete bool
	// mutable are the config keys the CSP lets PUT /volumes/{id} change: the mutable
	// parameters CreateVolume and ControllerModifyVolume accept (csp.mutableParameters
	// overrides them for a CSP that allows others).
	mutable []string
	// nameLimit, when not 0, is the longest name the CSP takes, and nameChar the characters
	// it takes: other names are shortened stably (names).
	nameLimit int
	nameChar  func(rune) bool
}

// truenas-csp makes a volume's ID of its dataset path ("pool_root_NAME") and a snapshot's of
// the volume's and its own name ("VOLUMEID@NAME"); 48-byte names keep both within CSI's
// 128 bytes under a root path of up to 30 bytes. It refuses "_" in names.
const truenasNameLimit = 48

func truenasNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.'
}

// The mutable config keys of the HPE Nimble/Alletra 6000 CSP and of truenas-csp.
var (
	hpeMutable     = []string{"description", "performance_policy", "limit_iops", "limit_mbps", "folder", "tier"}
	truenasMutable = []string{"description", "deduplication", "compression", "sync", "volblocksize"}
)

var profiles = map[string]profile{
	"spec": {name: "spec", listVolumes: true, listAllSnapshots: true, groups: true, modify: true, mutable: hpeMutable},
	"hpe":  {name: "hpe", listVolumes: true, listAllSnapshots: true, groups: true, modify: true, mutable: hpeMutable},
	"truenas": {name: "truenas", modify: true, emptyNotFoundOnDelete: true, verifySnapshotDelete: true, mutable: truenasMutable,
		nameLimit: truenasNameLimit, nameChar: truenasNameChar},
}

// profileNamed returns the profile called name ("" is spec).
func profileNamed(name string) (profile, error) {
	if name == "" {
		name = "spec"
	}
	p, ok := profiles[name]
	if !ok {
		return profile{}, fmt.Errorf("profile: %q is not spec, hpe or truenas", name)
	}
	return p, nil
}

// controllerCapabilities are the Controller capabilities the profile advertises: never
// GET_CAPACITY (no CSP endpoint), LIST_VOLUMES_PUBLISHED_NODES and VOLUME_CONDITION (a CSP
// volume only says whether it is published, not where), PUBLISH_READONLY (no read-only
// ACL) or SINGLE_NODE_MULTI_WRITER.
func (p profile) controllerCapabilities() []csi.ControllerServiceCapability_RPC_Type {
	caps := []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	}
	if p.listAllSnapshots {
		caps = append(caps, csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS)
	}
	if p.listVolumes {
		caps = append(caps, csi.ControllerServiceCapability_RPC_LIST_VOLUMES)
	}
	if p.modify {
		caps = append(caps, csi.ControllerServiceCapability_RPC_MODIFY_VOLUME)
	}
	return caps
}
