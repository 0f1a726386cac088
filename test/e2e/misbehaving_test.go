package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/grpc"
	"github.com/csi-gateway/csi-gateway/backends/rest"
	"github.com/csi-gateway/csi-gateway/proxy"
)

// This file drives a real proxy.Server in enforce mode, in front of a real grpc backend and a
// real rest backend, whose driver and HTTP (Connect JSON) appliance, both written here, break
// one rule of REQUIREMENTS §7.1 or §7.3 per row, on demand. Each row checks that the gateway
// repairs the answer (strips details, maps NOT_FOUND on a delete to OK, ...) or refuses it
// with a clear message naming the backend and the rule — never a malformed OK.

// misbehavingRow is one rule a backend breaks, and what the caller must get instead.
type misbehavingRow struct {
	rule   string // where REQUIREMENTS states it
	name   string
	method string
	req    proto.Message
	answer misbehaviour
	only   string     // "grpc" or "http" when the misbehaviour exists on one transport only
	want   codes.Code // what the caller gets
	why    string     // why that code: a column of docs/validation.md's table of these rows
	said   []string   // what the message must hold (the backend's name is checked too)
	unsaid []string   // what it must not
	local  bool       // the gateway refuses before calling the backend
	// driver, when set, is what the caller gets instead from a gRPC driver under the default
	// repair setting of grpc backends (spec: the driver's status passes unless the spec
	// forbids it, docs/tap.md), and why.
	driver *misbehavingOutcome
}

// misbehavingOutcome is a row's code and why for a gRPC driver, where they differ.
type misbehavingOutcome struct {
	want codes.Code
	why  string
}

const misbehavingCanary = "CANARY-misbehaving-7f3a-pw"

func misbehavingVolumeCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func misbehavingRows() []misbehavingRow {
	const (
		cv = "/csi.v1.Controller/CreateVolume"
		dv = "/csi.v1.Controller/DeleteVolume"
	)
	createReq := &csi.CreateVolumeRequest{Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{misbehavingVolumeCapability()}}
	publishReq := &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1", VolumeCapability: misbehavingVolumeCapability()}
	snapReq := &csi.CreateSnapshotRequest{SourceVolumeId: "vol-1", Name: "snap-1"}
	snap := func(edit func(*csi.Snapshot)) *csi.CreateSnapshotResponse {
		s := &csi.Snapshot{SnapshotId: "snap-1", SourceVolumeId: "vol-1", CreationTime: timestamppb.New(time.Unix(1700000000, 0)), ReadyToUse: true}
		edit(s)
		return &csi.CreateSnapshotResponse{Snapshot: s}
	}
	vol := &csi.Volume{VolumeId: "vol-1", CapacityBytes: 1 << 30}
	entries := func(n int) []*csi.ListVolumesResponse_Entry {
		var out []*csi.ListVolumesResponse_Entry
		for i := range n {
			out = append(out, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{VolumeId: fmt.Sprintf("vol-%d", i)}, Status: &csi.ListVolumesResponse_VolumeStatus{}})
		}
		return out
	}
	const (
		malformed       = "malformed "
		malformedCreate = "a malformed create answer: the volume may exist, and a non-final code keeps the provisioner retrying under the same name (INTERNAL is final: a claim deleted meanwhile would leak it)"
		malformedAnswer = "a malformed answer is never passed on as OK; retrying gets the same answer"
		incompatible    = "the backend has a volume of that name that does not match the request: the spec's \"already exists but is incompatible\"; the caller must change the arguments or the name (UNAVAILABLE would be retried forever)"
		wrongExpansion  = "a malformed answer: the volume is not as large as asked, and OK would tell the CO (the resizer, kubelet) it is"
	)
	return []misbehavingRow{
		// §7.1: statuses.
		{rule: "7.1 #1", name: "status details are stripped", why: "the driver's code stands; the spec requires an empty `details`", method: "/csi.v1.Controller/ControllerPublishVolume", req: publishReq,
			answer: misbehaviour{code: codes.NotFound, msg: "volume vol-1 not found", details: true}, want: codes.NotFound, said: []string{"volume vol-1 not found"}},
		{rule: "7.1 #2", name: "an empty message gets one", why: "the code stands; the gateway writes a message naming the backend (the spec wants one a person can read)", method: "/csi.v1.Controller/ControllerPublishVolume", req: publishReq,
			answer: misbehaviour{code: codes.FailedPrecondition}, want: codes.FailedPrecondition},
		{rule: "7.1 #2", name: "a secret in the message is scrubbed", why: "the code stands; the request's secret values are scrubbed from the message", method: dv,
			req:    &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"password": misbehavingCanary}},
			answer: misbehaviour{code: codes.Unauthenticated, msg: "login with password " + misbehavingCanary + " refused"},
			want:   codes.Unauthenticated, said: []string{"login with password"}, unsaid: []string{misbehavingCanary}},
		{rule: "7.1 #2", name: "a long message is bounded", why: "the code stands; the message is cut to 1 KiB", method: "/csi.v1.Controller/ControllerGetVolume", req: &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"},
			answer: misbehaviour{code: codes.Internal, msg: strings.Repeat("trace line; ", 400)}, want: codes.Internal, said: []string{"trace line"},
			driver: &misbehavingOutcome{codes.Internal, "the driver's message passes whole, up to 16 KiB: the spec sets no bound, and cutting it would change what the driver said"}},
		{rule: "7.1 #3", name: "NOT_FOUND on DeleteVolume is OK", why: "deleting what does not exist MUST succeed", method: dv, req: &csi.DeleteVolumeRequest{VolumeId: "vol-1"},
			answer: misbehaviour{code: codes.NotFound, msg: "no such volume", details: true}, want: codes.OK},
		{rule: "7.1 #3", name: "NOT_FOUND on DeleteSnapshot is OK", why: "deleting what does not exist MUST succeed", method: "/csi.v1.Controller/DeleteSnapshot", req: &csi.DeleteSnapshotRequest{SnapshotId: "snap-1"},
			answer: misbehaviour{code: codes.NotFound, msg: "no such snapshot"}, want: codes.OK},
		{rule: "7.1 #3", name: "NOT_FOUND on NodeUnstageVolume is OK", why: "a volume the node does not know is not staged there", method: "/csi.v1.Node/NodeUnstageVolume",
			req:    &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/var/lib/kubelet/staging/vol-1"},
			answer: misbehaviour{code: codes.NotFound, msg: "not staged"}, want: codes.OK,
			driver: &misbehavingOutcome{codes.NotFound, "the spec lists NOT_FOUND for a volume that does not exist: the driver's answer passes"}},
		{rule: "7.1 #4", name: "NOT_FOUND on ControllerUnpublishVolume is OK", why: "a volume or node the backend does not know can be regarded as unpublished; NOT_FOUND would make Kubernetes retry the detach forever", method: "/csi.v1.Controller/ControllerUnpublishVolume",
			req: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1"}, answer: misbehaviour{code: codes.NotFound, msg: "node gone"}, want: codes.OK,
			driver: &misbehavingOutcome{codes.NotFound, "the spec lists NOT_FOUND for a volume or node that cannot be regarded as unpublished: it is the driver's one signal that it cannot, and OK would be a wrong success on the path that decides whether the volume may be attached elsewhere"}},
		{rule: "7.1 #7, DESIGN §6.3", name: "a transient failure stays UNAVAILABLE", why: "non-final: the provisioner retries under the same name; INTERNAL is final to the sidecars and can leak the volume", method: cv, req: createReq,
			answer: misbehaviour{code: codes.Unavailable, msg: "array busy, try again"}, want: codes.Unavailable, said: []string{"array busy"}},
		{rule: "7.1 #7, DESIGN §6.3", name: "a load balancer's 502 is UNAVAILABLE, not INTERNAL", why: "a proxy in front of the appliance failed: transient, retried", only: "http", method: cv, req: createReq,
			answer: misbehaviour{html: http.StatusBadGateway}, want: codes.Unavailable, said: []string{"502 Bad Gateway"}},
		{rule: "7.1 #7, DESIGN §6.3", name: "a connection reset is UNAVAILABLE, not INTERNAL", why: "the connection was lost: transient, retried", only: "http", method: cv, req: createReq,
			answer: misbehaviour{reset: true}, want: codes.Unavailable},
		{rule: "7.3 (canonical codes)", name: "UNKNOWN is INTERNAL", why: "UNKNOWN means nothing in CSI; INTERNAL is the canonical code of a backend's own failure", method: "/csi.v1.Controller/ControllerGetVolume", req: &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"},
			answer: misbehaviour{code: codes.Unknown, msg: "something odd"}, want: codes.Internal, said: []string{"something odd"},
			driver: &misbehavingOutcome{codes.Unknown, "the spec does not forbid UNKNOWN: the driver's code passes"}},
		{rule: "7.3 (canonical codes)", name: "a code outside the canonical range is INTERNAL", why: "not a canonical gRPC code", only: "grpc", method: "/csi.v1.Controller/ControllerGetVolume",
			req: &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"}, answer: misbehaviour{code: codes.Code(42), msg: "vendor code"}, want: codes.Internal},
		{rule: "7.1 #26", name: "FAILED_PRECONDITION keeps the node id", why: "the spec wants the other node's ID in the message; it is not a secret", method: "/csi.v1.Controller/ControllerPublishVolume", req: publishReq,
			answer: misbehaviour{code: codes.FailedPrecondition, msg: "volume vol-1 is published to node node-7"}, want: codes.FailedPrecondition, said: []string{"node-7"}},

		// §7.1 #11, §7.2: capabilities.
		{rule: "7.1 #11", name: "an RPC the backend does not advertise is UNIMPLEMENTED", why: "the capability gates the RPC; the caller MUST NOT retry; refused before the backend", method: "/csi.v1.Controller/CreateSnapshot", req: snapReq,
			answer: misbehaviour{caps: func(c *misbehavingCaps) { c.dropController(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT) }},
			want:   codes.Unimplemented, said: []string{"does not advertise the controller capability CREATE_DELETE_SNAPSHOT, which CreateSnapshot needs"}, local: true},
		{rule: "7.1 #11", name: "ListVolumes without LIST_VOLUMES is UNIMPLEMENTED", why: "the capability gates the RPC; refused before the backend", method: "/csi.v1.Controller/ListVolumes", req: &csi.ListVolumesRequest{},
			answer: misbehaviour{caps: func(c *misbehavingCaps) { c.dropController(csi.ControllerServiceCapability_RPC_LIST_VOLUMES) }},
			want:   codes.Unimplemented, said: []string{"LIST_VOLUMES"}, local: true},
		{rule: "7.2", name: "NodePublishVolume without staging_target_path on a staging node", why: "the spec's \"staging target path not set\" row; refused before the backend", method: "/csi.v1.Node/NodePublishVolume",
			req:  &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/var/lib/kubelet/pods/p/vol-1", VolumeCapability: misbehavingVolumeCapability()},
			want: codes.FailedPrecondition, said: []string{"staging_target_path is required", "STAGE_UNSTAGE_VOLUME"}, local: true},

		// §7.3: answers.
		{rule: "7.3 required", name: "OK CreateVolume without volume_id", why: malformedCreate, method: cv, req: createReq,
			answer: misbehaviour{resp: &csi.CreateVolumeResponse{Volume: &csi.Volume{CapacityBytes: 1 << 30}}},
			want:   codes.Unavailable, said: []string{malformed + "CreateVolume answer: volume.volume_id is required", "retry with the same name"}},
		{rule: "7.3 required", name: "OK CreateVolume with nothing", why: malformedCreate, method: cv, req: createReq, answer: misbehaviour{resp: &csi.CreateVolumeResponse{}},
			want: codes.Unavailable, said: []string{"volume is required"}},
		{rule: "7.3 sizes", name: "oversized volume_id", why: malformedCreate, method: cv, req: createReq,
			answer: misbehaviour{resp: &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: strings.Repeat("v", 200)}}},
			want:   codes.Unavailable, said: []string{"volume.volume_id is 200 bytes long; CSI allows at most 128"}},
		{rule: "7.3 sizes", name: "oversized volume_context", why: malformedCreate, method: cv, req: createReq,
			answer: misbehaviour{resp: &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", VolumeContext: map[string]string{"iqn": strings.Repeat("x", 5000)}}}},
			want:   codes.Unavailable, said: []string{"volume.volume_context holds 5003 bytes"}},
		{rule: "7.3 non-negative", name: "negative capacity", why: malformedCreate, method: cv, req: createReq,
			answer: misbehaviour{resp: &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", CapacityBytes: -1}}},
			want:   codes.Unavailable, said: []string{"volume.capacity_bytes must not be negative"}},
		{rule: "7.3 topology", name: "accessible_topology without VOLUME_ACCESSIBILITY_CONSTRAINTS", why: malformedCreate, method: cv, req: createReq,
			answer: misbehaviour{resp: &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", AccessibleTopology: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}}}},
				caps: func(c *misbehavingCaps) { c.dropPlugin(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS) }},
			want: codes.Unavailable, said: []string{"volume.accessible_topology is set but the backend does not advertise the plugin capability VOLUME_ACCESSIBILITY_CONSTRAINTS"}},
		{rule: "7.3 topology", name: "malformed topology key", why: malformedCreate, method: cv, req: createReq,
			answer: misbehaviour{resp: &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", AccessibleTopology: []*csi.Topology{{Segments: map[string]string{"Example.COM/zone": "a"}}}}}},
			want:   codes.Unavailable, said: []string{`key "Example.COM/zone" has a prefix that is not a lower-case domain name`}},
		{rule: "7.3 required", name: "snapshot without creation_time", why: malformedCreate, method: "/csi.v1.Controller/CreateSnapshot", req: snapReq,
			answer: misbehaviour{resp: snap(func(s *csi.Snapshot) { s.CreationTime = nil })},
			want:   codes.Unavailable, said: []string{"snapshot.creation_time is required"}},
		{rule: "7.3 required (a proto3 bool cannot be missing)", name: "snapshot without ready_to_use is a snapshot not ready", why: "a proto3 bool cannot be missing: false is a valid answer (the CO asks again)", method: "/csi.v1.Controller/CreateSnapshot", req: snapReq,
			answer: misbehaviour{resp: snap(func(s *csi.Snapshot) { s.ReadyToUse = false })}, want: codes.OK},
		{rule: "7.3 non-negative", name: "snapshot of negative size", why: malformedCreate, method: "/csi.v1.Controller/CreateSnapshot", req: snapReq,
			answer: misbehaviour{resp: snap(func(s *csi.Snapshot) { s.SizeBytes = -4096 })}, want: codes.Unavailable, said: []string{"snapshot.size_bytes must not be negative"}},
		{rule: "7.3 max_entries", name: "ListVolumes ignoring max_entries", why: malformedAnswer, method: "/csi.v1.Controller/ListVolumes", req: &csi.ListVolumesRequest{MaxEntries: 2},
			answer: misbehaviour{resp: &csi.ListVolumesResponse{Entries: entries(5)}},
			want:   codes.Internal, said: []string{malformed + "ListVolumes answer: entries holds 5 entries, more than the max_entries 2 asked for", "fix the backend"}},
		{rule: "7.3 status with LIST_VOLUMES_PUBLISHED_NODES", name: "ListVolumes entry without status", why: malformedAnswer, method: "/csi.v1.Controller/ListVolumes", req: &csi.ListVolumesRequest{},
			answer: misbehaviour{resp: &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: vol}}}},
			want:   codes.Internal, said: []string{"entries[0].status is required: the backend advertises the controller capability LIST_VOLUMES_PUBLISHED_NODES"}},
		{rule: "7.3 sizes", name: "oversized next_token", why: malformedAnswer, method: "/csi.v1.Controller/ListSnapshots", req: &csi.ListSnapshotsRequest{},
			answer: misbehaviour{resp: &csi.ListSnapshotsResponse{NextToken: strings.Repeat("t", 300)}}, want: codes.Internal, said: []string{"next_token is 300 bytes long"}},
		{rule: "7.3 required", name: "ControllerGetVolume without status", why: malformedAnswer, method: "/csi.v1.Controller/ControllerGetVolume", req: &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"},
			answer: misbehaviour{resp: &csi.ControllerGetVolumeResponse{Volume: vol}}, want: codes.Internal, said: []string{"status is required"}},
		{rule: "7.3 non-negative", name: "negative available_capacity", why: malformedAnswer, method: "/csi.v1.Controller/GetCapacity", req: &csi.GetCapacityRequest{},
			answer: misbehaviour{resp: &csi.GetCapacityResponse{AvailableCapacity: -1}}, want: codes.Internal, said: []string{"available_capacity must not be negative"}},
		{rule: "7.3 confirmed", name: "confirmed with no capabilities", why: malformedAnswer, method: "/csi.v1.Controller/ValidateVolumeCapabilities",
			req:    &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1", VolumeCapabilities: []*csi.VolumeCapability{misbehavingVolumeCapability()}},
			answer: misbehaviour{resp: &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{}}},
			want:   codes.Internal, said: []string{"confirmed.volume_capabilities is required"}},
		{rule: "7.3 sizes", name: "oversized publish_context", why: malformedAnswer, method: "/csi.v1.Controller/ControllerPublishVolume", req: publishReq,
			answer: misbehaviour{resp: &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"lun": strings.Repeat("1", 5000)}}},
			want:   codes.Internal, said: []string{"publish_context holds 5003 bytes"}},
		{rule: "7.3 plugin name", name: "plugin name too long", why: malformedAnswer, method: "/csi.v1.Identity/GetPluginInfo", req: &csi.GetPluginInfoRequest{},
			answer: misbehaviour{resp: &csi.GetPluginInfoResponse{Name: strings.Repeat("a", 64) + ".example.com", VendorVersion: "1.0"}},
			want:   codes.Internal, said: []string{"name is not a plugin name: at most 63 characters"}},
		{rule: "7.3 plugin name", name: "plugin name with an underscore (v0 style)", why: malformedAnswer, method: "/csi.v1.Identity/GetPluginInfo", req: &csi.GetPluginInfoRequest{},
			answer: misbehaviour{resp: &csi.GetPluginInfoResponse{Name: "com.example_csi", VendorVersion: "1.0"}}, want: codes.Internal, said: []string{"name is not a plugin name"}},
		{rule: "7.3 required", name: "GetPluginInfo without vendor_version", why: malformedAnswer, method: "/csi.v1.Identity/GetPluginInfo", req: &csi.GetPluginInfoRequest{},
			answer: misbehaviour{resp: &csi.GetPluginInfoResponse{Name: "csi.example.com"}}, want: codes.Internal, said: []string{"vendor_version is required"}},
		{rule: "7.3 sizes", name: "node_id over 256 bytes", why: malformedAnswer, method: "/csi.v1.Node/NodeGetInfo", req: &csi.NodeGetInfoRequest{},
			answer: misbehaviour{resp: &csi.NodeGetInfoResponse{NodeId: strings.Repeat("n", 257)}}, want: codes.Internal, said: []string{"node_id is 257 bytes long; CSI allows at most 256"}},
		{rule: "7.3 non-negative", name: "negative volume usage", why: malformedAnswer, method: "/csi.v1.Node/NodeGetVolumeStats", req: &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: "/var/lib/kubelet/pods/p/vol-1"},
			answer: misbehaviour{resp: &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Total: 100, Used: -1, Unit: csi.VolumeUsage_BYTES}}}},
			want:   codes.Internal, said: []string{"usage[0].used must not be negative"}},
		{rule: "7.3", name: "an answer that is not the response message", why: malformedAnswer, only: "grpc", method: "/csi.v1.Controller/ControllerExpandVolume",
			req:    &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}},
			answer: misbehaviour{raw: "\x0a\x7f\x01"}, want: codes.Internal, said: []string{"not a valid csi.v1.ControllerExpandVolumeResponse"}},
		{rule: "7.3", name: "an answer that is not the response message", why: malformedAnswer, only: "http", method: "/csi.v1.Controller/ControllerExpandVolume",
			req:    &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}},
			answer: misbehaviour{raw: `{"capacityBytes": "lots"}`}, want: codes.Internal},

		// Issue 23: wrong successes, list tokens, an older driver's capability.
		{rule: "2.2 CreateVolume, TopologyRequirement.requisite", name: "a volume outside the requisite topology", method: cv,
			req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: createReq.VolumeCapabilities,
				AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "z1"}}}}},
			answer: misbehaviour{resp: &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", AccessibleTopology: []*csi.Topology{{Segments: map[string]string{"zone": "z9"}}}}}},
			want:   codes.AlreadyExists, why: incompatible,
			said: []string{`the CreateVolume answer does not match the request: volume.accessible_topology {"zone"="z9"} is outside accessibility_requirements.requisite {"zone"="z1"}`, "use another name"}},
		{rule: "2.2 CreateVolume ALREADY_EXISTS", name: "the same name with a larger capacity: the existing, smaller volume", method: cv,
			req:    &csi.CreateVolumeRequest{Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}, VolumeCapabilities: createReq.VolumeCapabilities},
			answer: misbehaviour{resp: &csi.CreateVolumeResponse{Volume: vol}}, want: codes.AlreadyExists, why: incompatible,
			said: []string{"volume.capacity_bytes is 1073741824, less than the required_bytes 2147483648 asked for", "use another name, or the arguments it was created with"}},
		{rule: "2.2 ControllerExpandVolume", name: "ControllerExpandVolume answering less than asked", method: "/csi.v1.Controller/ControllerExpandVolume",
			req:    &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 30}},
			answer: misbehaviour{resp: &csi.ControllerExpandVolumeResponse{CapacityBytes: 4 << 30, NodeExpansionRequired: true}}, want: codes.Internal, why: wrongExpansion,
			said: []string{malformed + "ControllerExpandVolume answer: capacity_bytes is 4294967296, less than the required_bytes 8589934592 asked for"}},
		{rule: "2.3 NodeExpandVolume", name: "NodeExpandVolume answering less than asked", method: "/csi.v1.Node/NodeExpandVolume",
			req:    &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: "/var/lib/kubelet/pods/p/vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 30}},
			answer: misbehaviour{resp: &csi.NodeExpandVolumeResponse{CapacityBytes: 4 << 30}}, want: codes.Internal, why: wrongExpansion + " (0, unknown, passes: the field is optional)",
			said: []string{"capacity_bytes is 4294967296, less than the required_bytes 8589934592 asked for"}},
		{rule: "2.2 ListVolumes, invalid starting_token", name: "INVALID_ARGUMENT for a starting_token", method: "/csi.v1.Controller/ListVolumes",
			req:    &csi.ListVolumesRequest{StartingToken: "page-2"},
			answer: misbehaviour{code: codes.InvalidArgument, msg: "unknown token page-2"}, want: codes.Aborted,
			why:  "the spec's code for an invalid starting_token: the CO restarts its listing; INVALID_ARGUMENT is final and would end it",
			said: []string{"unknown token page-2", "the backend refused the starting_token of this ListVolumes call, which CSI answers with ABORTED: restart the listing with an empty starting_token"}},
		{rule: "2.2 ListSnapshots, paging", name: "a next_token that repeats the starting_token", method: "/csi.v1.Controller/ListSnapshots",
			req:    &csi.ListSnapshotsRequest{StartingToken: "page-2"},
			answer: misbehaviour{resp: &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: snap(func(*csi.Snapshot) {}).Snapshot}}, NextToken: "page-2"}},
			want:   codes.Internal, why: "following the token would list the same page forever; the listing ends for good (ABORTED would have the CO start over and meet the same loop)",
			said: []string{"answered ListSnapshots with a next_token that repeats the starting_token it was given", "fix the backend's paging"}},
		{rule: "1.3 NodeGetVolumeStats gate (v1.12 and older)", name: "a driver advertising VOLUME_CONDITION, not GET_VOLUME_STATS", method: "/csi.v1.Node/NodeGetVolumeStats",
			req: &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: "/var/lib/kubelet/pods/p/vol-1"},
			answer: misbehaviour{resp: &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Total: 100, Used: 10, Available: 90, Unit: csi.VolumeUsage_BYTES}}},
				caps: func(c *misbehavingCaps) {
					c.node = append(dropCapability(c.node, csi.NodeServiceCapability_RPC_GET_VOLUME_STATS), 4)
				}},
			want: codes.OK, why: "before v1.13 a node plugin MUST implement NodeGetVolumeStats for GET_VOLUME_STATS or VOLUME_CONDITION (4, removed in v1.13): an older driver keeps working"},
	}
}

// misbehavingGateway serves a proxy.Server in enforce mode with every method routed to be
// (called name), and returns a client connection to it. Each row gets its own, so that no
// capability set cached for one row decides another.
func misbehavingGateway(t *testing.T, name string, be backends.Backend) *grpc.ClientConn {
	t.Helper()
	srv, err := proxy.NewServer(proxy.Options{
		Routes:     []proxy.Route{{Methods: []string{"*"}, Backend: name}},
		Backends:   map[string]backends.Backend{name: be},
		Repairs:    map[string]proxy.Repair{"driver": proxy.DefaultRepair("grpc"), "appliance": proxy.DefaultRepair("rest")},
		Log:        slog.New(slog.DiscardHandler),
		Validation: proxy.ValidationEnforce,
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := serveOnSocket(t, srv)
	return conn
}

// TestMisbehavingBackends runs every row against a gRPC driver and an HTTP appliance.
func TestMisbehavingBackends(t *testing.T) {
	m := &misbehaver{}
	m.set(misbehaviour{})
	driver := startTestDriver(t, t.TempDir(), "driver.sock", m.driverAnswer)
	hs := httptest.NewServer(m)
	t.Cleanup(hs.Close)

	transports := []struct {
		name, backend string
		open          func(t *testing.T) backends.Backend
	}{
		{"grpc", "driver", func(t *testing.T) backends.Backend {
			be, err := grpcbackend.New("driver", grpcbackend.Config{Target: driver.Endpoint})
			if err != nil {
				t.Fatal(err)
			}
			return be
		}},
		{"http", "appliance", func(t *testing.T) backends.Backend {
			be, err := rest.New("appliance", rest.Config{URLs: []string{hs.URL}, AllowSecretsOverPlaintextHTTP: true, // the echoed-secret row
				Retry:          rest.Retry{MaxAttempts: 2, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
				RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return be
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for _, row := range misbehavingRows() {
				if row.only != "" && row.only != tr.name {
					continue
				}
				t.Run(row.name, func(t *testing.T) {
					be := tr.open(t)
					t.Cleanup(func() { be.Close() })
					conn := misbehavingGateway(t, tr.backend, be)
					m.set(row.answer)
					misbehavingCall(t, conn, row, tr.backend)
					called := m.calls()
					switch {
					case row.local && len(called) != 0:
						t.Errorf("§%s: the backend was called (%v); the gateway should have refused on its own", row.rule, called)
					case !row.local && (len(called) == 0 || called[0] != row.method):
						t.Errorf("§%s: the backend got %v, want %s", row.rule, called, row.method)
					}
				})
			}
		})
	}
}

// misbehavingCall makes the row's call and checks what the caller gets.
func misbehavingCall(t *testing.T, conn *grpc.ClientConn, row misbehavingRow, backend string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := invoke(ctx, conn, row.method, row.req)
	want := row.want
	// A driver's own failure passes under grpc's default repair setting, its message unprefixed.
	driversOwn := backend == "driver" && row.answer.code != codes.OK
	if backend == "driver" && row.driver != nil {
		want = row.driver.want
	}
	var st *status.Status
	if driversOwn && want != codes.OK {
		// checkStatus's 1 KiB bound is the gateway's own (plugin); a driver's message passes
		// whole up to backends.MaxMessageBytes.
		st = status.Convert(err)
		if st.Code() != want || st.Message() == "" || len(st.Message()) > backends.MaxMessageBytes || len(st.Details()) != 0 {
			t.Errorf("§%s %s: got %v, %d bytes of message, %d details; want %v, a message of at most %d bytes, no details",
				row.rule, row.name, st.Code(), len(st.Message()), len(st.Details()), want, backends.MaxMessageBytes)
		}
	} else {
		st = checkStatus(t, "§"+row.rule+" "+row.name, err, want)
	}
	if want == codes.OK {
		if row.answer.resp == nil && len(resps) == 1 && proto.Size(resps[0]) != 0 {
			t.Errorf("§%s: answer %v, want the empty message", row.rule, resps[0])
		}
		if row.answer.resp != nil && (len(resps) != 1 || !proto.Equal(resps[0], row.answer.resp)) {
			t.Errorf("§%s: answer %v, want %v", row.rule, resps, row.answer.resp)
		}
		return
	}
	msg := st.Message()
	if !row.local && !driversOwn && !strings.Contains(msg, fmt.Sprintf("backend %q", backend)) {
		t.Errorf("§%s: message %q does not name backend %q", row.rule, msg, backend)
	}
	for _, s := range row.said {
		if !strings.Contains(msg, s) {
			t.Errorf("§%s: message %q does not say %q", row.rule, msg, s)
		}
	}
	for _, s := range row.unsaid {
		if strings.Contains(msg, s) {
			t.Errorf("§%s: message %q holds %q", row.rule, msg, s)
		}
	}
}
