package csp

import (
	"context"
	"net/http"
	"net/url"

	"github.com/csi-gateway/csi-gateway/backends"
)

// The reads every RPC builds on. Each returns found=false for the CSP's "does not exist"
// (a CSP-shaped 404) and a classified error for any other failure.

// mustFind is a read by ID whose miss is NOT_FOUND, naming what the ID is in the request
// ("source volume").
func mustFind[T any](ctx context.Context, b *Backend, rpc, what, id string, get func(ctx context.Context, rpc, id string) (T, bool, error)) (T, error) {
	v, found, err := get(ctx, rpc, id)
	if err == nil && !found {
		err = b.notFoundError(rpc, what, id)
	}
	return v, err
}

func (b *Backend) getVolume(ctx context.Context, rpc, id string) (v volume, found bool, err error) {
	found, err = b.get(ctx, rpc, "/volumes/"+url.PathEscape(id), nil, &v)
	return v, found, err
}

// volumeByName looks a volume up by its CSI name: how creates stay idempotent.
func (b *Backend) volumeByName(ctx context.Context, rpc, name string) (volume, bool, error) {
	var list []volume
	found, err := b.get(ctx, rpc, "/volumes", url.Values{"name": {name}}, &list)
	for _, v := range list {
		if v.Name == name {
			return v, true, nil
		}
	}
	_ = found // a 200 without the name (truenas-csp's empty list) is absent too
	return volume{}, false, err
}

func (b *Backend) getSnapshot(ctx context.Context, rpc, id string) (s snapshot, found bool, err error) {
	found, err = b.get(ctx, rpc, "/snapshots/"+url.PathEscape(id), nil, &s)
	return s, found, err
}

// snapshotByName looks a snapshot of a volume up by name.
func (b *Backend) snapshotByName(ctx context.Context, rpc, volumeID, name string) (snapshot, bool, error) {
	var list []snapshot
	_, err := b.get(ctx, rpc, "/snapshots", url.Values{"volume_id": {volumeID}, "name": {name}}, &list)
	for _, s := range list {
		if s.Name == name && s.VolumeID == volumeID {
			return s, true, nil
		}
	}
	return snapshot{}, false, err
}

func (b *Backend) getVolumeGroup(ctx context.Context, rpc, id string) (g volumeGroup, found bool, err error) {
	found, err = b.get(ctx, rpc, "/volume_groups/"+url.PathEscape(id), nil, &g)
	return g, found, err
}

func (b *Backend) getSnapshotGroup(ctx context.Context, rpc, id string) (sg snapshotGroup, found bool, err error) {
	found, err = b.get(ctx, rpc, "/snapshot_groups/"+url.PathEscape(id), nil, &sg)
	return sg, found, err
}

// get reads path into out: found=true for 200, false for the CSP's "does not exist".
func (b *Backend) get(ctx context.Context, rpc, path string, query url.Values, out any) (bool, error) {
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodGet, path: path, query: query, idempotent: true}, out)
	switch {
	case err != nil:
		return false, err
	case a.status == http.StatusOK:
		return true, nil
	case a.notFound(b.profile):
		return false, nil
	}
	return false, b.classify(rpc, a)
}

// notFoundError is the NOT_FOUND of an object a call names.
func (b *Backend) notFoundError(rpc, what, id string) error {
	return b.errorf(backends.ClassNotFound, rpc, "%s %q does not exist", what, id)
}

// remove deletes path: deleted (2xx) or already absent is OK, as CSI wants of a delete; any
// other answer is classified.
func (b *Backend) remove(ctx context.Context, rpc, path string) error {
	a, err := b.do(ctx, request{rpc: rpc, method: http.MethodDelete, path: path, idempotent: true}, nil)
	switch {
	case err != nil:
		return err
	case a.status/100 == 2, a.notFound(b.profile):
		return nil
	}
	return b.classify(rpc, a)
}
