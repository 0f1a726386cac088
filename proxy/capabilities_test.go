package proxy

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/csispec"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/redact"
)

// capCacheHarness is a capability cache over one fake backend "fake", on a hand clock.
func capCacheHarness(caps *fakeCaps, log *slog.Logger) (*capabilityCache, *testutil.Clock) {
	clock := testutil.NewClock()
	c := newCapabilityCache(map[string]backends.Backend{"fake": validationFake(caps, nil)}, log, time.Minute)
	c.now = clock.Now
	return c, clock
}

var valListVolumes = csispec.ControllerCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES)

// cacheView is the cache as one call routed to backend sees it.
type cacheView struct {
	c       *capabilityCache
	ctx     context.Context
	backend string
}

func (v cacheView) Has(kind csispec.CapKind, cap int32) (has, known bool) {
	return v.c.Has(v.ctx, v.backend, kind, cap)
}

// lacks reports whether view knows that its backend does not advertise ref.
func lacks(view cacheView, ref csispec.CapRef) bool {
	has, known := view.Has(ref.Kind, ref.Cap)
	return known && !has
}

// TestCapabilityCacheRefresh: a set is fetched once and used until the refresh interval has
// passed.
func TestCapabilityCacheRefresh(t *testing.T) {
	caps := valAllCaps()
	c, clock := capCacheHarness(caps, slog.New(slog.DiscardHandler))
	view := cacheView{c, context.Background(), "fake"}
	for range 3 {
		if has, known := view.Has(valListVolumes.Kind, valListVolumes.Cap); !has || !known {
			t.Fatalf("has = %v, %v", has, known)
		}
	}
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
	clock.Advance(59 * time.Second)
	view.Has(valListVolumes.Kind, valListVolumes.Cap)
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d fetches before the minute is up, want 1", n)
	}
	clock.Advance(time.Second)
	view.Has(valListVolumes.Kind, valListVolumes.Cap)
	if n := caps.fetchCount(); n != 2 {
		t.Errorf("%d fetches after a minute, want 2", n)
	}
}

// TestCapabilityCacheRefetchesOnMiss: a capability the cached set lacks is asked for again
// once the set is older than the retry interval, so a backend that gains it is noticed
// without waiting for the refresh; repeated misses inside the interval cost no fetch.
func TestCapabilityCacheRefetchesOnMiss(t *testing.T) {
	caps := valAllCaps().without(valListVolumes)
	c, clock := capCacheHarness(caps, slog.New(slog.DiscardHandler))
	view := cacheView{c, context.Background(), "fake"}
	if !lacks(view, valListVolumes) {
		t.Fatal("LIST_VOLUMES is not missing")
	}
	clock.Advance(time.Second)
	lacks(view, valListVolumes)
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d fetches for misses within %v, want 1", n, capabilityRetry)
	}
	caps.mu.Lock()
	caps.controller = append(caps.controller, valListVolumes.Cap)
	caps.mu.Unlock()
	clock.Advance(capabilityRetry)
	if has, known := view.Has(valListVolumes.Kind, valListVolumes.Cap); !has || !known {
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
	caps := valAllCaps().without(valListVolumes)
	caps.err = backends.Errorf(backends.ClassUnavailable, "backend \"fake\": connection refused")
	fake := validationFake(caps, &csi.ListVolumesResponse{})
	routes := routeTable{{Methods: []string{"*"}, Backend: "fake"}}
	bes := map[string]backends.Backend{"fake": fake}
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	h := chain(dispatch(routes, bes), validate(ValidationEnforce, routes, bes, nil, logger), canonicalize(redact.NewRedactor(), nil))

	for range 2 {
		if _, err := runValidated(t, h, "/csi.v1.Controller/ListVolumes", &csi.ListVolumesRequest{}); err != nil {
			t.Fatalf("ListVolumes = %v, want forwarded (capabilities unknown)", err)
		}
	}
	if got := valForwarded(fake); len(got) != 2 {
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
	caps = valAllCaps().without(valListVolumes)
	c, clock := capCacheHarness(caps, slog.New(slog.DiscardHandler))
	view := cacheView{c, context.Background(), "fake"}
	if !lacks(view, valListVolumes) {
		t.Fatal("LIST_VOLUMES is not missing")
	}
	caps.mu.Lock()
	caps.err = errors.New("down")
	caps.mu.Unlock()
	clock.Advance(2 * time.Minute)
	if !lacks(view, valListVolumes) {
		t.Error("the set fetched before was dropped when its refresh failed")
	}
}

// TestCapabilityCacheCallerGone: a caller that leaves during a fetch does not make the set
// count as unfetchable for the next caller.
func TestCapabilityCacheCallerGone(t *testing.T) {
	caps := valAllCaps()
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
	if _, known := (cacheView{c, ctx, "fake"}).Has(valListVolumes.Kind, valListVolumes.Cap); known {
		t.Fatal("the set is known after a fetch on a cancelled context")
	}
	if has, known := (cacheView{c, context.Background(), "fake"}).Has(valListVolumes.Kind, valListVolumes.Cap); !has || !known {
		t.Errorf("next caller: has = %v, %v; want the set fetched", has, known)
	}
}

// TestCapabilityCacheSharesFetch: concurrent lookups of a cold set make one fetch.
func TestCapabilityCacheSharesFetch(t *testing.T) {
	caps := valAllCaps()
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
			has, known := (cacheView{c, context.Background(), "fake"}).Has(valListVolumes.Kind, valListVolumes.Cap)
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
	caps := valAllCaps()
	fake := validationFake(caps, nil)
	h := validationHandler(ValidationEnforce, fake, slog.New(slog.DiscardHandler))
	if _, err := runValidated(t, h, "/csi.v1.Controller/ControllerGetCapabilities", &csi.ControllerGetCapabilitiesRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := runValidated(t, h, "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "v"}); err != nil {
		t.Fatal(err)
	}
	if n := caps.fetchCount(); n != 1 {
		t.Errorf("%d capability RPCs, want 1 (the caller's own)", n)
	}
}

// TestCapabilityUnroutedMethod: a method no route matches is not gated (dispatch refuses it).
func TestCapabilityUnroutedMethod(t *testing.T) {
	routes := routeTable{{Methods: []string{"/csi.v1.Node/*"}, Backend: "fake"}}
	caps := valAllCaps()
	bes := map[string]backends.Backend{"fake": validationFake(caps, nil)}
	h := chain(dispatch(routes, bes), validate(ValidationEnforce, routes, bes, nil, slog.New(slog.DiscardHandler)), canonicalize(redact.NewRedactor(), nil))
	_, err := runValidated(t, h, "/csi.v1.Controller/DeleteVolume", &csi.DeleteVolumeRequest{VolumeId: "v"})
	checkRefusal(t, err, codes.Unimplemented, "no route for /csi.v1.Controller/DeleteVolume")
	if n := caps.fetchCount(); n != 0 {
		t.Errorf("%d fetches, want none", n)
	}
}
