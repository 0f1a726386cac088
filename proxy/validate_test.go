package proxy

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/csispec"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/redact"
)

// fakeCaps are the capability sets a validation test's backend advertises, by enum number.
type fakeCaps struct {
	mu                              sync.Mutex
	plugin, controller, node, group []int32
	v0Plugin, v0Controller, v0Node  []int32 // CSI v0's sets
	err                             error   // the answer to every capability RPC, when set
	fetches                         int     // capability RPCs answered
}

// allCaps advertises every capability of CSI v1.13, and of CSI v0.3.
func valAllCaps() *fakeCaps {
	return &fakeCaps{
		plugin:       []int32{1, 2, 3, 4, 5},
		controller:   []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17},
		node:         []int32{1, 2, 3, 5, 6, 7, 8},
		group:        []int32{1},
		v0Plugin:     []int32{1, 2},
		v0Controller: []int32{1, 2, 3, 4, 5, 6},
		v0Node:       []int32{1},
	}
}

// without returns a copy of fc that lacks the capabilities in drop.
func (fc *fakeCaps) without(drop ...csispec.CapRef) *fakeCaps {
	out := &fakeCaps{plugin: fc.plugin, controller: fc.controller, node: fc.node, group: fc.group,
		v0Plugin: fc.v0Plugin, v0Controller: fc.v0Controller, v0Node: fc.v0Node, err: fc.err}
	sets := [...]*[]int32{csispec.PluginCaps: &out.plugin, csispec.ControllerCaps: &out.controller, csispec.NodeCaps: &out.node,
		csispec.GroupCaps: &out.group, csispec.V0PluginCaps: &out.v0Plugin, csispec.V0ControllerCaps: &out.v0Controller, csispec.V0NodeCaps: &out.v0Node}
	for _, r := range drop {
		set := sets[r.Kind]
		*set = slices.DeleteFunc(slices.Clone(*set), func(c int32) bool { return c == r.Cap })
	}
	return out
}

// answer answers method when it is a capability RPC.
func (fc *fakeCaps) answer(method string) (resp []byte, handled bool, err error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var m proto.Message
	switch method {
	case csispec.PluginCaps.Method():
		r := &csi.GetPluginCapabilitiesResponse{}
		for _, c := range fc.plugin {
			r.Capabilities = append(r.Capabilities, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
				Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_Type(c)}}})
		}
		m = r
	case csispec.ControllerCaps.Method():
		r := &csi.ControllerGetCapabilitiesResponse{}
		for _, c := range fc.controller {
			r.Capabilities = append(r.Capabilities, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
				Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_Type(c)}}})
		}
		m = r
	case csispec.NodeCaps.Method():
		r := &csi.NodeGetCapabilitiesResponse{}
		for _, c := range fc.node {
			r.Capabilities = append(r.Capabilities, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
				Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_Type(c)}}})
		}
		m = r
	case csispec.GroupCaps.Method():
		r := &csi.GroupControllerGetCapabilitiesResponse{}
		for _, c := range fc.group {
			r.Capabilities = append(r.Capabilities, &csi.GroupControllerServiceCapability{Type: &csi.GroupControllerServiceCapability_Rpc{
				Rpc: &csi.GroupControllerServiceCapability_RPC{Type: csi.GroupControllerServiceCapability_RPC_Type(c)}}})
		}
		m = r
	case csispec.V0PluginCaps.Method():
		r := &csiv0.GetPluginCapabilitiesResponse{}
		for _, c := range fc.v0Plugin {
			r.Capabilities = append(r.Capabilities, &csiv0.PluginCapability{Type: &csiv0.PluginCapability_Service_{
				Service: &csiv0.PluginCapability_Service{Type: csiv0.PluginCapability_Service_Type(c)}}})
		}
		m = r
	case csispec.V0ControllerCaps.Method():
		r := &csiv0.ControllerGetCapabilitiesResponse{}
		for _, c := range fc.v0Controller {
			r.Capabilities = append(r.Capabilities, &csiv0.ControllerServiceCapability{Type: &csiv0.ControllerServiceCapability_Rpc{
				Rpc: &csiv0.ControllerServiceCapability_RPC{Type: csiv0.ControllerServiceCapability_RPC_Type(c)}}})
		}
		m = r
	case csispec.V0NodeCaps.Method():
		r := &csiv0.NodeGetCapabilitiesResponse{}
		for _, c := range fc.v0Node {
			r.Capabilities = append(r.Capabilities, &csiv0.NodeServiceCapability{Type: &csiv0.NodeServiceCapability_Rpc{
				Rpc: &csiv0.NodeServiceCapability_RPC{Type: csiv0.NodeServiceCapability_RPC_Type(c)}}})
		}
		m = r
	default:
		return nil, false, nil
	}
	fc.fetches++
	if fc.err != nil {
		return nil, true, fc.err
	}
	b, err := proto.Marshal(m)
	return b, true, err
}

func (fc *fakeCaps) fetchCount() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.fetches
}

// validationFake is a backend that advertises caps and answers any other call with resp
// (marshalled deterministically, so that maps of several keys compare as bytes; the empty
// message when nil).
func validationFake(caps *fakeCaps, resp proto.Message) *serverFake {
	return &serverFake{answer: func(_ context.Context, method string, _ []byte) ([]byte, error) {
		if b, ok, err := caps.answer(method); ok {
			return b, err
		}
		if resp == nil {
			return nil, nil
		}
		return proto.MarshalOptions{Deterministic: true}.Marshal(resp)
	}}
}

// forwarded returns the calls of f that are not capability RPCs.
func valForwarded(f *serverFake) []string {
	var out []string
	for _, c := range f.recorded() {
		if _, capability := csispec.CapKindOf(c.method); !capability {
			out = append(out, c.method)
		}
	}
	return out
}

// validationHandler is the part of the server's chain around validation, in the server's
// order: validate → canonicalize → dispatch, every method routed to fake.
func validationHandler(mode ValidationMode, fake backends.Backend, log *slog.Logger) Handler {
	routes := routeTable{{Methods: []string{"*"}, Backend: "fake"}}
	bes := map[string]backends.Backend{"fake": fake}
	return chain(dispatch(routes, bes), validate(mode, routes, bes, nil, log), canonicalize(redact.NewRedactor(), nil))
}

// runValidated sends req to method through h and returns the raw answer and the error.
func runValidated(t *testing.T, h Handler, method string, req proto.Message) ([]byte, error) {
	t.Helper()
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	info := lookupMethod(method)
	if info == nil {
		t.Fatalf("%s is not a known method", method)
	}
	call := &Call{Method: method, Start: time.Now(), Request: raw, info: info}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = h(ctx, call)
	return call.Response, err
}

// checkRefusal checks err against the code and message fragment of a case ("" code OK).
func checkRefusal(t *testing.T, err error, want codes.Code, fragment string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != want {
		t.Fatalf("code = %v (%q), want %v", st.Code(), st.Message(), want)
	}
	if want == codes.OK {
		return
	}
	if !strings.Contains(st.Message(), fragment) {
		t.Errorf("message %q does not contain %q", st.Message(), fragment)
	}
	if len(st.Message()) > maxMessageBytes {
		t.Errorf("message of %d bytes", len(st.Message()))
	}
	if len(st.Proto().GetDetails()) != 0 {
		t.Errorf("status has details")
	}
}

func valMountCap(mode csi.VolumeCapability_AccessMode_Mode, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func valWriter(flags ...string) *csi.VolumeCapability {
	return valMountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, flags...)
}

func valCreateVolume(edit func(r *csi.CreateVolumeRequest)) *csi.CreateVolumeRequest {
	r := &csi.CreateVolumeRequest{Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{valWriter()}}
	if edit != nil {
		edit(r)
	}
	return r
}

func valTopo(kv ...string) *csi.Topology {
	t := &csi.Topology{Segments: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Segments[kv[i]] = kv[i+1]
	}
	return t
}

// validRequests are a valid request of every unary method the gateway checks, and of the
// streaming SnapshotMetadata ones: none may be refused (no false positives).
var validRequests = map[string]proto.Message{
	"/csi.v1.Identity/GetPluginInfo":                    &csi.GetPluginInfoRequest{},
	"/csi.v1.Identity/GetPluginCapabilities":            &csi.GetPluginCapabilitiesRequest{},
	"/csi.v1.Identity/Probe":                            &csi.ProbeRequest{},
	"/csi.v1.Controller/CreateVolume":                   valCreateVolume(nil),
	"/csi.v1.Controller/DeleteVolume":                   &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"user.name": "x"}},
	"/csi.v1.Controller/ControllerPublishVolume":        &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: strings.Repeat("n", 256), VolumeCapability: valWriter()},
	"/csi.v1.Controller/ControllerUnpublishVolume":      &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1"},
	"/csi.v1.Controller/ValidateVolumeCapabilities":     &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1", VolumeCapabilities: []*csi.VolumeCapability{valWriter()}},
	"/csi.v1.Controller/ListVolumes":                    &csi.ListVolumesRequest{MaxEntries: 10, StartingToken: "t"},
	"/csi.v1.Controller/GetCapacity":                    &csi.GetCapacityRequest{AccessibleTopology: valTopo("topology.example.com/zone", "z1")},
	"/csi.v1.Controller/ControllerGetCapabilities":      &csi.ControllerGetCapabilitiesRequest{},
	"/csi.v1.Controller/CreateSnapshot":                 &csi.CreateSnapshotRequest{SourceVolumeId: "vol-1", Name: "snap-1"},
	"/csi.v1.Controller/DeleteSnapshot":                 &csi.DeleteSnapshotRequest{SnapshotId: "snap-1"},
	"/csi.v1.Controller/ListSnapshots":                  &csi.ListSnapshotsRequest{},
	"/csi.v1.Controller/GetSnapshot":                    &csi.GetSnapshotRequest{SnapshotId: "snap-1"},
	"/csi.v1.Controller/ControllerExpandVolume":         &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}},
	"/csi.v1.Controller/ControllerGetVolume":            &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"},
	"/csi.v1.Controller/ControllerModifyVolume":         &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{"iops": "100"}},
	"/csi.v1.Controller/ControllerGetVolumeHealth":      &csi.ControllerGetVolumeHealthRequest{VolumeId: "vol-1"},
	"/csi.v1.Controller/ControllerListVolumeHealth":     &csi.ControllerListVolumeHealthRequest{},
	"/csi.v1.GroupController/CreateVolumeGroupSnapshot": &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"vol-1"}},
	"/csi.v1.GroupController/DeleteVolumeGroupSnapshot": &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g", SnapshotIds: []string{"s"}},
	"/csi.v1.GroupController/GetVolumeGroupSnapshot":    &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "g", SnapshotIds: []string{"s"}},
	"/csi.v1.Node/NodeStageVolume": &csi.NodeStageVolumeRequest{VolumeId: "vol-1", VolumeCapability: valWriter(),
		StagingTargetPath: "/var/lib/kubelet/plugins/kubernetes.io/csi/example.com/" + strings.Repeat("a", 200) + "/globalmount"},
	"/csi.v1.Node/NodeUnstageVolume": &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging"},
	"/csi.v1.Node/NodePublishVolume": &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging",
		TargetPath: "/var/lib/kubelet/pods/" + strings.Repeat("p", 150) + "/mount", VolumeCapability: valWriter()},
	"/csi.v1.Node/NodeUnpublishVolume":                       &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/target"},
	"/csi.v1.Node/NodeGetVolumeStats":                        &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: "/target"},
	"/csi.v1.Node/NodeExpandVolume":                          &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: "/target"},
	"/csi.v1.Node/NodeGetVolumeHealth":                       &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1"},
	"/csi.v1.Node/NodeGetStorageHealth":                      &csi.NodeGetStorageHealthRequest{},
	"/csi.v1.Node/NodeGetCapabilities":                       &csi.NodeGetCapabilitiesRequest{},
	"/csi.v1.Node/NodeGetInfo":                               &csi.NodeGetInfoRequest{},
	"/csi.v1.GroupController/GroupControllerGetCapabilities": &csi.GroupControllerGetCapabilitiesRequest{},
	"/volumegroup.Controller/CreateVolumeGroup":              &volumegroup.CreateVolumeGroupRequest{Name: "vg"},
	"/volumegroup.Controller/DeleteVolumeGroup":              &volumegroup.DeleteVolumeGroupRequest{VolumeGroupId: "vg-1"},
	"/volumegroup.Controller/ModifyVolumeGroupMembership":    &volumegroup.ModifyVolumeGroupMembershipRequest{VolumeGroupId: "vg-1"},
	"/volumegroup.Controller/ControllerGetVolumeGroup":       &volumegroup.ControllerGetVolumeGroupRequest{VolumeGroupId: "vg-1"},
	"/volumegroup.Controller/ListVolumeGroups":               &volumegroup.ListVolumeGroupsRequest{MaxEntries: 3},
	"/csi.v1.SnapshotMetadata/GetMetadataAllocated":          &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1"},
	"/csi.v1.SnapshotMetadata/GetMetadataDelta":              &csi.GetMetadataDeltaRequest{BaseSnapshotId: "a", TargetSnapshotId: "b"},
}

// CSI v0's methods, valid by v0's rules (with a secret, which validation never looks at).
func init() { maps.Copy(validRequests, testutil.V0Requests(map[string]string{"password": "x"})) }

// TestValidateValidRequestsPass: a valid request of every method passes every rule, with a
// backend that advertises everything.
func TestValidateValidRequestsPass(t *testing.T) {
	for method := range newMethodTable() {
		if _, ok := validRequests[method]; !ok && !lookupMethod(method).desc.IsStreamingClient() {
			t.Errorf("no valid request for %s in validRequests", method)
		}
	}
	for method, req := range validRequests {
		t.Run(method, func(t *testing.T) {
			v := &validator{mode: ValidationEnforce, routes: routeTable{{Methods: []string{"*"}, Backend: "fake"}},
				caps: newCapabilityCache(map[string]backends.Backend{"fake": validationFake(valAllCaps(), nil)}, slog.New(slog.DiscardHandler), time.Minute)}
			if vs := v.checkRequest(context.Background(), method, "fake", req); len(vs) != 0 {
				t.Errorf("refused: %v", vs)
			}
		})
	}
}

// TestValidateWarnForwardsAndLogs: in warn mode, what enforce refuses is logged at warn
// level and forwarded, and a malformed answer reaches the caller.
func TestValidateWarnForwardsAndLogs(t *testing.T) {
	var log serverLog
	logger := slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fake := validationFake(valAllCaps().without(csispec.ControllerCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES)), nil)
	h := validationHandler(ValidationWarn, fake, logger)

	resp, err := runValidated(t, h, "/csi.v1.Controller/CreateVolume", valCreateVolume(func(r *csi.CreateVolumeRequest) { r.Name = "" }))
	if err != nil || len(resp) != 0 {
		t.Fatalf("CreateVolume = %v, %x; want the backend's empty answer", err, resp)
	}
	if _, err := runValidated(t, h, "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{}); err != nil {
		t.Fatalf("ListVolumes = %v, want forwarded", err)
	}
	if got, want := valForwarded(fake), []string{"/csi.v1.Controller/CreateVolume", "/csi.v1.Controller/ListVolumes"}; !slices.Equal(got, want) {
		t.Errorf("the backend got %v, want %v", got, want)
	}
	lines := log.lines(t, "validation")
	if len(lines) != 3 {
		t.Fatalf("%d validation lines, want 3 (bad request, bad answer, ungated method):\n%s", len(lines), log.String())
	}
	for i, want := range []map[string]any{
		{"level": "WARN", "method": "CreateVolume", "backend": "fake", "side": "request", "would_refuse_with": "InvalidArgument",
			"problem": "csi-gateway: invalid CreateVolume request: name is required"},
		{"level": "WARN", "method": "CreateVolume", "side": "response", "would_refuse_with": "Unavailable"},
		{"level": "WARN", "method": "ListVolumes", "side": "request", "would_refuse_with": "Unimplemented"},
	} {
		for k, v := range want {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, lines[i][k], v)
			}
		}
	}
	if p, _ := lines[1]["problem"].(string); !strings.Contains(p, `backend "fake": malformed CreateVolume answer: volume is required`) {
		t.Errorf("problem = %q", p)
	}
}

// TestValidateOffForwardsSilently: off checks nothing, fetches no capabilities and logs
// nothing; neither does the zero Options.
func TestValidateOffForwardsSilently(t *testing.T) {
	for _, mode := range []ValidationMode{ValidationOff, ""} {
		t.Run(string(mode), func(t *testing.T) {
			var log serverLog
			caps := valAllCaps().without(csispec.ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME))
			fake := validationFake(caps, nil)
			h := validationHandler(mode, fake, slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})))
			if _, err := runValidated(t, h, "/csi.v1.Controller/CreateVolume", &csi.CreateVolumeRequest{Name: "pvc\x01"}); err != nil {
				t.Fatalf("CreateVolume = %v, want forwarded", err)
			}
			if got := valForwarded(fake); len(got) != 1 {
				t.Errorf("the backend got %v", got)
			}
			if n := caps.fetchCount(); n != 0 {
				t.Errorf("%d capability fetches, want none", n)
			}
			if log.String() != "" {
				t.Errorf("logged:\n%s", log.String())
			}
		})
	}
}

// TestValidateRefusalSurvivesCanonicalize: a refusal keeps its code and message should the
// chain ever put canonicalize outside validation.
func TestValidateRefusalSurvivesCanonicalize(t *testing.T) {
	routes := routeTable{{Methods: []string{"*"}, Backend: "fake"}}
	for _, tc := range []struct {
		caps *fakeCaps
		req  proto.Message
		code codes.Code
	}{
		{valAllCaps(), &csi.DeleteVolumeRequest{}, codes.InvalidArgument},
		{valAllCaps().without(csispec.ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)), &csi.DeleteVolumeRequest{VolumeId: "v"}, codes.Unimplemented},
	} {
		bes := map[string]backends.Backend{"fake": validationFake(tc.caps, nil)}
		inner := chain(dispatch(routes, bes), validate(ValidationEnforce, routes, bes, nil, slog.New(slog.DiscardHandler)))
		outer := chain(dispatch(routes, bes), canonicalize(redact.NewRedactor(), nil), validate(ValidationEnforce, routes, bes, nil, slog.New(slog.DiscardHandler)))
		_, errIn := runValidated(t, inner, "/csi.v1.Controller/DeleteVolume", tc.req)
		_, errOut := runValidated(t, outer, "/csi.v1.Controller/DeleteVolume", tc.req)
		if status.Code(errIn) != tc.code || status.Convert(errIn).Message() != status.Convert(errOut).Message() || status.Code(errOut) != tc.code {
			t.Errorf("validate alone: %v; under canonicalize: %v; want %v both, same message", errIn, errOut, tc.code)
		}
	}
}

// TestValidationThroughServer: the server's chain validates when Options.Validation says
// so: a bad request is refused over gRPC and never reaches the backend.
func TestValidationThroughServer(t *testing.T) { onEachTransport(t, testValidationThroughServer) }

func testValidationThroughServer(t *testing.T, tr Transport) {
	fake := validationFake(valAllCaps(), &csi.DeleteVolumeResponse{})
	opts := serverFakeOptions(fake)
	opts.Validation = ValidationEnforce
	ts := startServerHarness(t, tr, opts, ListenerPolicy{}, slog.LevelInfo)
	ctl := csi.NewControllerClient(ts.conn)
	_, err := ctl.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: strings.Repeat("v", 200)})
	checkRefusal(t, err, codes.InvalidArgument, "csi-gateway: invalid DeleteVolume request: volume_id is 200 bytes long; CSI allows at most 128")
	if _, err := ctl.DeleteVolume(serverCallCtx(t), &csi.DeleteVolumeRequest{VolumeId: "vol-1"}); err != nil {
		t.Fatalf("valid DeleteVolume: %v", err)
	}
	if got := valForwarded(fake); !slices.Equal(got, []string{"/csi.v1.Controller/DeleteVolume"}) {
		t.Errorf("the backend got %v, want the valid DeleteVolume only", got)
	}
	lines := ts.log.lines(t, "call")
	if len(lines) != 2 || lines[0]["code"] != "InvalidArgument" {
		t.Errorf("call log lines: %v", lines)
	}
}

// TestValidationOfEmptyRequests: a request with no field set arrives as no bytes at all; it is
// checked like any other (gated here, as the backend does not list volumes).
func TestValidationOfEmptyRequests(t *testing.T) { onEachTransport(t, testValidationOfEmptyRequests) }

func testValidationOfEmptyRequests(t *testing.T, tr Transport) {
	fake := validationFake(valAllCaps().without(csispec.ControllerCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES)), &csi.GetPluginInfoResponse{})
	opts := serverFakeOptions(fake)
	opts.Validation = ValidationEnforce
	ts := startServerHarness(t, tr, opts, ListenerPolicy{}, slog.LevelInfo)
	_, err := csi.NewControllerClient(ts.conn).ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{})
	checkRefusal(t, err, codes.Unimplemented, "controller capability LIST_VOLUMES, which ListVolumes needs")
	_, err = csi.NewIdentityClient(ts.conn).GetPluginInfo(serverCallCtx(t), &csi.GetPluginInfoRequest{})
	checkRefusal(t, err, codes.Internal, `backend "fake": malformed GetPluginInfo answer: name is required; vendor_version is required`)
	if got := valForwarded(fake); !slices.Equal(got, []string{"/csi.v1.Identity/GetPluginInfo"}) {
		t.Errorf("the backend got %v", got)
	}
}

func TestParseValidationMode(t *testing.T) {
	for in, want := range map[string]ValidationMode{"": ValidationEnforce, "enforce": ValidationEnforce, " Warn ": ValidationWarn, "OFF": ValidationOff} {
		if got, err := ParseValidationMode(in); err != nil || got != want {
			t.Errorf("ParseValidationMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseValidationMode("strict"); err == nil || err.Error() != `unknown validation mode "strict"; use enforce, warn or off` {
		t.Errorf("ParseValidationMode(strict) = %v", err)
	}
}
