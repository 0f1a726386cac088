package proxy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

// gatingCase is one capability rule: the backend lacks the capabilities in drop, and the
// caller of method with req gets code and fragment (codes.OK: forwarded).
type gatingCase struct {
	name     string
	drop     []capRef
	method   string
	req      proto.Message // nil: validRequests[method]
	code     codes.Code
	fragment string
}

func gatingCases() []gatingCase {
	c := ctrlCap
	n := nodeCap
	p := pluginCap
	group := capRef{groupCaps, int32(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)}
	unimpl := func(name string, ref capRef, method, capName string) gatingCase {
		short := method[strings.LastIndexByte(method, '/')+1:]
		return gatingCase{name: name, drop: []capRef{ref}, method: method, code: codes.Unimplemented,
			fragment: `csi-gateway: backend "fake" does not advertise the ` + capName + ", which " + short + " needs"}
	}
	ro := &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n", VolumeCapability: writer(), Readonly: true}
	snode := mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)
	return []gatingCase{
		unimpl("CreateVolume", c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME), "/csi.v1.Controller/CreateVolume", "controller capability CREATE_DELETE_VOLUME"),
		unimpl("CreateSnapshot", c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT), "/csi.v1.Controller/CreateSnapshot", "controller capability CREATE_DELETE_SNAPSHOT"),
		unimpl("DeleteSnapshot", c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT), "/csi.v1.Controller/DeleteSnapshot", "controller capability CREATE_DELETE_SNAPSHOT"),
		unimpl("ListVolumes", c(csi.ControllerServiceCapability_RPC_LIST_VOLUMES), "/csi.v1.Controller/ListVolumes", "controller capability LIST_VOLUMES"),
		unimpl("ListSnapshots", c(csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS), "/csi.v1.Controller/ListSnapshots", "controller capability LIST_SNAPSHOTS"),
		unimpl("GetCapacity", c(csi.ControllerServiceCapability_RPC_GET_CAPACITY), "/csi.v1.Controller/GetCapacity", "controller capability GET_CAPACITY"),
		unimpl("ControllerPublish", c(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), "/csi.v1.Controller/ControllerPublishVolume", "controller capability PUBLISH_UNPUBLISH_VOLUME"),
		unimpl("ControllerUnpublish", c(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), "/csi.v1.Controller/ControllerUnpublishVolume", "controller capability PUBLISH_UNPUBLISH_VOLUME"),
		unimpl("ControllerExpand", c(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME), "/csi.v1.Controller/ControllerExpandVolume", "controller capability EXPAND_VOLUME"),
		unimpl("ControllerGetVolume", c(csi.ControllerServiceCapability_RPC_GET_VOLUME), "/csi.v1.Controller/ControllerGetVolume", "controller capability GET_VOLUME"),
		unimpl("ControllerModifyVolume", c(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME), "/csi.v1.Controller/ControllerModifyVolume", "controller capability MODIFY_VOLUME"),
		unimpl("GetSnapshot", c(csi.ControllerServiceCapability_RPC_GET_SNAPSHOT), "/csi.v1.Controller/GetSnapshot", "controller capability GET_SNAPSHOT"),
		unimpl("ControllerGetVolumeHealth", c(csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH), "/csi.v1.Controller/ControllerGetVolumeHealth", "controller capability GET_VOLUME_HEALTH"),
		unimpl("NodeStage", n(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), "/csi.v1.Node/NodeStageVolume", "node capability STAGE_UNSTAGE_VOLUME"),
		unimpl("NodeUnstage", n(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), "/csi.v1.Node/NodeUnstageVolume", "node capability STAGE_UNSTAGE_VOLUME"),
		unimpl("NodeExpandVolume", n(csi.NodeServiceCapability_RPC_EXPAND_VOLUME), "/csi.v1.Node/NodeExpandVolume", "node capability EXPAND_VOLUME"),
		unimpl("NodeGetVolumeStats", n(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS), "/csi.v1.Node/NodeGetVolumeStats", "node capability GET_VOLUME_STATS"),
		unimpl("CreateVolumeGroupSnapshot", group, "/csi.v1.GroupController/CreateVolumeGroupSnapshot", "group controller capability CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT"),
		unimpl("GetVolumeGroupSnapshot", group, "/csi.v1.GroupController/GetVolumeGroupSnapshot", "group controller capability CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT"),
		unimpl("GetMetadataDelta", p(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE), "/csi.v1.SnapshotMetadata/GetMetadataDelta", "plugin capability SNAPSHOT_METADATA_SERVICE"),
		{name: "unrelated capability missing", drop: []capRef{c(csi.ControllerServiceCapability_RPC_LIST_VOLUMES)}, method: "/csi.v1.Controller/DeleteVolume"},
		{name: "ValidateVolumeCapabilities is never gated", drop: []capRef{c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)}, method: "/csi.v1.Controller/ValidateVolumeCapabilities"},
		{name: "volumegroup is not gated", drop: []capRef{group}, method: "/volumegroup.Controller/DeleteVolumeGroup"},

		{name: "NodePublish without staging path, node stages", method: "/csi.v1.Node/NodePublishVolume",
			req:  &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: writer()},
			code: codes.FailedPrecondition, fragment: `csi-gateway: staging_target_path is required: backend "fake" advertises the node capability STAGE_UNSTAGE_VOLUME; call NodeStageVolume first`},
		{name: "NodePublish without staging path, node does not stage", drop: []capRef{n(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)},
			method: "/csi.v1.Node/NodePublishVolume", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: writer()}},
		{name: "accessibility_requirements without topology", drop: []capRef{p(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)},
			method: "/csi.v1.Controller/CreateVolume", req: createVolume(func(r *csi.CreateVolumeRequest) {
				r.AccessibilityRequirements = &csi.TopologyRequirement{Preferred: []*csi.Topology{topo("zone", "a")}}
			}), code: codes.InvalidArgument,
			fragment: `invalid CreateVolume request: accessibility_requirements must not be set: backend "fake" does not advertise the plugin capability VOLUME_ACCESSIBILITY_CONSTRAINTS`},
		{name: "GetCapacity topology without topology", drop: []capRef{p(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)},
			method: "/csi.v1.Controller/GetCapacity", code: codes.InvalidArgument, fragment: "accessible_topology must not be set"},
		{name: "snapshot accessibility without the capability", drop: []capRef{p(csi.PluginCapability_Service_SNAPSHOT_ACCESSIBILITY_CONSTRAINTS)},
			method: "/csi.v1.Controller/CreateSnapshot", req: &csi.CreateSnapshotRequest{SourceVolumeId: "v", Name: "s",
				AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("zone", "a")}}},
			code: codes.InvalidArgument, fragment: "plugin capability SNAPSHOT_ACCESSIBILITY_CONSTRAINTS"},
		{name: "readonly publish without PUBLISH_READONLY", drop: []capRef{c(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY)},
			method: "/csi.v1.Controller/ControllerPublishVolume", req: ro, code: codes.InvalidArgument,
			fragment: `invalid ControllerPublishVolume request: readonly must not be set: backend "fake" does not advertise the controller capability PUBLISH_READONLY`},
		{name: "readonly publish with PUBLISH_READONLY", method: "/csi.v1.Controller/ControllerPublishVolume", req: ro},
		{name: "volume from snapshot without snapshots", drop: []capRef{c(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT)},
			method: "/csi.v1.Controller/CreateVolume", req: createVolume(func(r *csi.CreateVolumeRequest) {
				r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "s"}}}
			}), code: codes.InvalidArgument, fragment: "volume_content_source.snapshot must not be set"},
		{name: "clone without CLONE_VOLUME", drop: []capRef{c(csi.ControllerServiceCapability_RPC_CLONE_VOLUME)},
			method: "/csi.v1.Controller/CreateVolume", req: createVolume(func(r *csi.CreateVolumeRequest) {
				r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "v"}}}
			}), code: codes.InvalidArgument, fragment: "volume_content_source.volume must not be set: backend \"fake\" does not advertise the controller capability CLONE_VOLUME"},
		{name: "mutable_parameters without MODIFY_VOLUME", drop: []capRef{c(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME)},
			method: "/csi.v1.Controller/CreateVolume", req: createVolume(func(r *csi.CreateVolumeRequest) { r.MutableParameters = map[string]string{"iops": "5"} }),
			code: codes.InvalidArgument, fragment: "mutable_parameters must not be set"},
		{name: "single-node single-writer without the capability", drop: []capRef{c(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)},
			method: "/csi.v1.Controller/CreateVolume", req: createVolume(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = []*csi.VolumeCapability{snode} }),
			code: codes.InvalidArgument, fragment: "volume_capabilities[0].access_mode SINGLE_NODE_SINGLE_WRITER must not be set: backend \"fake\" does not advertise the controller capability SINGLE_NODE_MULTI_WRITER"},
		{name: "single-node mode on a node without the capability", drop: []capRef{n(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)},
			method: "/csi.v1.Node/NodeStageVolume", req: &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: snode},
			code: codes.InvalidArgument, fragment: "node capability SINGLE_NODE_MULTI_WRITER"},
	}
}

// TestCapabilityGating: each capability rule against a backend that answers the capability
// RPCs; a refused call never reaches the backend.
func TestCapabilityGating(t *testing.T) {
	for _, tc := range gatingCases() {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			if req == nil {
				req = validRequests[tc.method]
			}
			info := lookupMethod(tc.method)
			answer := info.output.New().Interface() // a valid answer for the cases that pass
			switch tc.method {
			case "/csi.v1.Controller/CreateVolume":
				answer = &csi.CreateVolumeResponse{Volume: volume(nil)}
			}
			fake := validationFake(allCaps().without(tc.drop...), answer)
			h := validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler))
			var err error
			if info.desc.IsStreamingServer() {
				err = validationStream(t, h, tc.method, req)
			} else {
				err, _ = runValidated(t, h, tc.method, req)
			}
			checkRefusal(t, err, tc.code, tc.fragment)
			want := []string{tc.method}
			if tc.code != codes.OK {
				want = nil
			}
			if got := forwarded(fake); !slices.Equal(got, want) {
				t.Errorf("the backend got %v, want %v", got, want)
			}
		})
	}
}

// validationStream runs a server-streaming call through h: the request is checked, the
// stream is the backend's (the fake refuses streams with UNIMPLEMENTED, which counts as
// forwarded here).
func validationStream(t *testing.T, h Handler, method string, req proto.Message) error {
	t.Helper()
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	call := &Call{Method: method, Start: time.Now(), Request: raw, info: lookupMethod(method), Stream: &replayStream{first: raw}}
	err = h(context.Background(), call)
	if err != nil && strings.Contains(err.Error(), "no streams here") {
		return nil
	}
	return err
}

// capClock is a clock the capability tests move by hand.
type capClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *capClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *capClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// capCacheHarness is a capability cache over one fake backend "fake", on a hand clock.
func capCacheHarness(caps *fakeCaps, log *slog.Logger) (*capabilityCache, *capClock) {
	clock := &capClock{t: time.Unix(1700000000, 0)}
	c := newCapabilityCache(map[string]backends.Backend{"fake": validationFake(caps, nil)}, log, time.Minute)
	c.now = clock.now
	return c, clock
}

var listVolumes = ctrlCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES)

// TestCapabilityCacheRefresh: a set is fetched once and used until the refresh interval has
// passed.
func TestCapabilityCacheRefresh(t *testing.T) {
	caps := allCaps()
	c, clock := capCacheHarness(caps, slog.New(slog.DiscardHandler))
	view := c.view(context.Background(), "fake")
	for range 3 {
		if has, known := view.has(listVolumes.kind, listVolumes.cap); !has || !known {
			t.Fatalf("has = %v, %v", has, known)
		}
	}
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
	clock.advance(59 * time.Second)
	view.has(listVolumes.kind, listVolumes.cap)
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d fetches before the minute is up, want 1", n)
	}
	clock.advance(time.Second)
	view.has(listVolumes.kind, listVolumes.cap)
	if n := caps.fetchCount(); n != 2 {
		t.Errorf("%d fetches after a minute, want 2", n)
	}
}

// TestCapabilityCacheRefetchesOnMiss: a capability the cached set lacks is asked for again
// once the set is older than the retry interval, so a backend that gains it is noticed
// without waiting for the refresh; repeated misses inside the interval cost no fetch.
func TestCapabilityCacheRefetchesOnMiss(t *testing.T) {
	caps := allCaps().without(listVolumes)
	c, clock := capCacheHarness(caps, slog.New(slog.DiscardHandler))
	view := c.view(context.Background(), "fake")
	if !view.lacks(listVolumes.kind, listVolumes.cap) {
		t.Fatal("LIST_VOLUMES is not missing")
	}
	clock.advance(time.Second)
	view.lacks(listVolumes.kind, listVolumes.cap)
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d fetches for misses within %v, want 1", n, capabilityRetry)
	}
	caps.mu.Lock()
	caps.controller = append(caps.controller, listVolumes.cap)
	caps.mu.Unlock()
	clock.advance(capabilityRetry)
	if has, known := view.has(listVolumes.kind, listVolumes.cap); !has || !known {
		t.Errorf("after the backend gained LIST_VOLUMES: has = %v, %v", has, known)
	}
	if n := caps.fetchCount(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

// TestCapabilityCacheFailsOpen: a set that cannot be fetched is unknown: the call is not
// gated but forwarded, the failure is logged, and the fetch is not retried within the retry
// interval; a set fetched before stays in use while refreshes fail.
func TestCapabilityCacheFailsOpen(t *testing.T) {
	var log serverLog
	caps := allCaps().without(listVolumes)
	caps.err = backends.Errorf(backends.ClassUnavailable, "backend \"fake\": connection refused")
	fake := validationFake(caps, &csi.ListVolumesResponse{})
	routes := routeTable{{Methods: []string{"*"}, Backend: "fake"}}
	bes := map[string]backends.Backend{"fake": fake}
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	h := chain(dispatch(routes, bes), validate(ValidationEnforce, routes, bes, logger), canonicalize(NewRedactor()))

	for range 2 {
		if err, _ := runValidated(t, h, "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{}); err != nil {
			t.Fatalf("ListVolumes = %v, want forwarded (capabilities unknown)", err)
		}
	}
	if got := forwarded(fake); len(got) != 2 {
		t.Errorf("the backend got %v", got)
	}
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d fetches, want 1 (the failure is remembered for %v)", n, capabilityRetry)
	}
	lines := log.lines(t, "capabilities unknown; calls are not gated by them")
	if len(lines) != 1 || lines[0]["backend"] != "fake" || lines[0]["method"] != "/csi.v1.Controller/ControllerGetCapabilities" ||
		!strings.Contains(lines[0]["error"].(string), "connection refused") || lines[0]["level"] != "WARN" {
		t.Errorf("log lines: %v", lines)
	}

	// A known set survives failed refreshes.
	caps = allCaps().without(listVolumes)
	c, clock := capCacheHarness(caps, slog.New(slog.DiscardHandler))
	view := c.view(context.Background(), "fake")
	if !view.lacks(listVolumes.kind, listVolumes.cap) {
		t.Fatal("LIST_VOLUMES is not missing")
	}
	caps.mu.Lock()
	caps.err = errors.New("down")
	caps.mu.Unlock()
	clock.advance(2 * time.Minute)
	if !view.lacks(listVolumes.kind, listVolumes.cap) {
		t.Error("the set fetched before was dropped when its refresh failed")
	}
}

// TestCapabilityCacheCallerGone: a caller that leaves during a fetch does not make the set
// count as unfetchable for the next caller.
func TestCapabilityCacheCallerGone(t *testing.T) {
	caps := allCaps()
	fake := &serverFake{answer: func(ctx context.Context, method string, _ []byte) ([]byte, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, _, err := caps.answer(method)
		return b, err
	}}
	c := newCapabilityCache(map[string]backends.Backend{"fake": fake}, slog.New(slog.DiscardHandler), time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, known := c.view(ctx, "fake").has(listVolumes.kind, listVolumes.cap); known {
		t.Fatal("the set is known after a fetch on a cancelled context")
	}
	if has, known := c.view(context.Background(), "fake").has(listVolumes.kind, listVolumes.cap); !has || !known {
		t.Errorf("next caller: has = %v, %v; want the set fetched", has, known)
	}
}

// TestCapabilityCacheSharesFetch: concurrent lookups of a cold set make one fetch.
func TestCapabilityCacheSharesFetch(t *testing.T) {
	caps := allCaps()
	release := make(chan struct{})
	slow := &serverFake{answer: func(_ context.Context, method string, _ []byte) ([]byte, error) {
		<-release
		b, _, err := caps.answer(method)
		return b, err
	}}
	c := newCapabilityCache(map[string]backends.Backend{"fake": slow}, slog.New(slog.DiscardHandler), time.Minute)
	var wg sync.WaitGroup
	results := make(chan bool, 20)
	for range 20 {
		wg.Go(func() {
			has, known := c.view(context.Background(), "fake").has(listVolumes.kind, listVolumes.cap)
			results <- has && known
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(results)
	for ok := range results {
		if !ok {
			t.Error("a lookup did not see LIST_VOLUMES")
		}
	}
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

// TestCapabilityCacheLearnsFromCallers: a caller's own ControllerGetCapabilities call
// refreshes the cache; the next gated call needs no fetch of its own.
func TestCapabilityCacheLearnsFromCallers(t *testing.T) {
	caps := allCaps()
	fake := validationFake(caps, nil)
	h := validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler))
	if err, _ := runValidated(t, h, "/csi.v1.Controller/ControllerGetCapabilities", &csi.ControllerGetCapabilitiesRequest{}); err != nil {
		t.Fatal(err)
	}
	if err, _ := runValidated(t, h, "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "v"}); err != nil {
		t.Fatal(err)
	}
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d capability RPCs, want 1 (the caller's own)", n)
	}
}

// TestCapabilityUnroutedMethod: a method no route matches is not gated (dispatch refuses it).
func TestCapabilityUnroutedMethod(t *testing.T) {
	routes := routeTable{{Methods: []string{"/csi.v1.Node/*"}, Backend: "fake"}}
	caps := allCaps()
	bes := map[string]backends.Backend{"fake": validationFake(caps, nil)}
	h := chain(dispatch(routes, bes), validate(ValidationEnforce, routes, bes, slog.New(slog.DiscardHandler)), canonicalize(NewRedactor()))
	err, _ := runValidated(t, h, "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "v"})
	checkRefusal(t, err, codes.Unimplemented, "no route for /csi.v1.Controller/DeleteVolume")
	if n := caps.fetchCount(); n != 0 {
		t.Errorf("%d fetches, want none", n)
	}
}
