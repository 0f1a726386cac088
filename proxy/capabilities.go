package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/csispec"
)

// Defaults of the capability cache.
const (
	// defaultCapabilityRefresh is how long a fetched capability set is used before it is
	// fetched again.
	defaultCapabilityRefresh = time.Minute
	// capabilityRetry is how soon a set is fetched again after a failed fetch, and how old a
	// set must be before a capability it lacks makes the gateway ask again (so a backend that
	// gained a capability is noticed quickly, but repeated calls of an RPC the backend does
	// not offer do not each cost a fetch).
	capabilityRetry = 5 * time.Second
	// capabilityTimeout bounds one fetch (the caller's deadline applies too).
	capabilityTimeout = 5 * time.Second
)

type capKey struct {
	backend string
	kind    csispec.CapKind
}

// capEntry is what the cache knows of one set of one backend.
type capEntry struct {
	set      csispec.CapSet // nil until a fetch succeeded
	fetched  time.Time      // when set was fetched
	failed   time.Time      // when the last fetch failed
	inflight chan struct{}
}

// capabilityCache fetches the capability sets of backends through their Unary method (the
// same path as any call routed there) and keeps them for refresh. A set that cannot be
// fetched is unknown, and the gateway does not gate by it (fail open: gating is a courtesy to
// the caller, the backend still refuses what it does not implement); the failure is logged
// and the fetch retried after capabilityRetry, while an older set, if any, stays in use.
// Concurrent lookups of a set share one fetch. It is safe for concurrent use.
type capabilityCache struct {
	backends map[string]backends.Backend
	log      *slog.Logger
	refresh  time.Duration
	retry    time.Duration
	timeout  time.Duration
	now      func() time.Time

	mu      sync.Mutex
	entries map[capKey]*capEntry
}

func newCapabilityCache(bes map[string]backends.Backend, log *slog.Logger, refresh time.Duration) *capabilityCache {
	return &capabilityCache{backends: bes, log: log, refresh: refresh, retry: capabilityRetry,
		timeout: capabilityTimeout, now: time.Now, entries: map[capKey]*capEntry{}}
}

// get returns the set of kind advertised by backend, fetching it when it is missing or older
// than the refresh interval (or, with force, older than the retry interval); ok is false when
// the set is unknown.
func (c *capabilityCache) get(ctx context.Context, backend string, kind csispec.CapKind, force bool) (csispec.CapSet, bool) {
	key := capKey{backend, kind}
	for {
		c.mu.Lock()
		e := c.entries[key]
		if e == nil {
			e = &capEntry{}
			c.entries[key] = e
		}
		now := c.now()
		switch {
		case e.set != nil && now.Sub(e.fetched) < c.refresh && !(force && now.Sub(e.fetched) >= c.retry):
			set := e.set
			c.mu.Unlock()
			return set, true
		case e.inflight != nil:
			wait, set := e.inflight, e.set
			c.mu.Unlock()
			select {
			case <-wait:
				force = false // the fetch just made is as fresh as it gets
				continue
			case <-ctx.Done():
				return set, set != nil
			}
		case now.Sub(e.failed) < c.retry:
			set := e.set
			c.mu.Unlock()
			return set, set != nil
		}
		done := make(chan struct{})
		e.inflight = done
		c.mu.Unlock()

		set, err := c.fetch(ctx, backend, kind)

		c.mu.Lock()
		e.inflight = nil
		close(done)
		switch {
		case err == nil:
			e.set, e.fetched = set, c.now()
		case ctx.Err() == nil: // the caller leaving is no fault of the backend's
			e.failed = c.now()
			c.log.LogAttrs(ctx, slog.LevelWarn, "capabilities unknown; calls are not gated by them",
				slog.String("backend", backend), slog.String("method", kind.Method()), slog.String("error", err.Error()))
		}
		set = e.set
		c.mu.Unlock()
		return set, set != nil
	}
}

// fetch asks backend for one capability set. The fetch is the gateway's own call, made for
// every caller: it carries none of the metadata of the caller that needed it (its custom
// keys, its trace context), only the caller's cancellation and deadline, which end it. It
// counts no attempt against that call.
func (c *capabilityCache) fetch(ctx context.Context, backend string, kind csispec.CapKind) (csispec.CapSet, error) {
	be := c.backends[backend]
	if be == nil {
		return nil, backends.Errorf(backends.ClassInternal, "no backend named %q", backend)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // context.AfterFunc below would cancel the fetch only once it started
	}
	own, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	ctx, _ = backends.WithCallInfo(own)
	raw, err := be.Unary(ctx, kind.Method(), []byte{})
	if err != nil {
		return nil, err
	}
	return kind.Decode(raw)
}

// learn stores the set a caller's own capability call just received from backend, so the
// cache is as fresh as what the caller knows.
func (c *capabilityCache) learn(backend, method string, resp proto.Message) {
	kind, ok := csispec.CapKindOf(method)
	if !ok {
		return
	}
	set := kind.Read(resp)
	c.mu.Lock()
	e := c.entries[capKey{backend, kind}]
	if e == nil {
		e = &capEntry{}
		c.entries[capKey{backend, kind}] = e
	}
	e.set, e.fetched = set, c.now()
	c.mu.Unlock()
}

// Has reports whether backend advertises capability cap of kind; known is false when the
// set could not be fetched, or backend is "" (an unrouted call), and then the caller does not
// gate. A capability the cached set lacks makes the cache ask again when the set is older
// than the retry interval. It implements csispec.Capabilities.
func (c *capabilityCache) Has(ctx context.Context, backend string, kind csispec.CapKind, cap int32) (has, known bool) {
	if backend == "" {
		return false, false
	}
	set, ok := c.get(ctx, backend, kind, false)
	if !ok {
		return false, false
	}
	if set[cap] {
		return true, true
	}
	set, ok = c.get(ctx, backend, kind, true)
	return set[cap], ok
}
