package translate

import (
	"context"
	"sync/atomic"
)

// versionCache holds what a backend speaks: fixed when configured, or Auto until a detection
// finds out. Detections are made one at a time (a caller waits for the one in flight, or
// leaves when its context ends); a detection that cannot tell (Auto) is not kept, so the next
// call that needs it asks again. It is safe for concurrent use.
type versionCache struct {
	known atomic.Value // Version
	turn  chan struct{}
}

func newVersionCache(v Version) *versionCache {
	c := &versionCache{turn: make(chan struct{}, 1)}
	c.known.Store(v)
	return c
}

// get returns the version known now (Auto when not yet detected).
func (c *versionCache) get() Version { return c.known.Load().(Version) }

// detect returns the known version, running ask when it is still Auto; Auto when ask cannot
// tell or ctx ends first.
func (c *versionCache) detect(ctx context.Context, ask func(context.Context) Version) Version {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return c.get()
	}
	defer func() { <-c.turn }()
	if v := c.get(); v != Auto {
		return v // found out by the detection this caller waited for
	}
	v := ask(ctx)
	if v != Auto {
		c.known.Store(v)
	}
	return v
}
