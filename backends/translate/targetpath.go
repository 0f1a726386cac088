package translate

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

// Target paths: in v1 the plugin creates NodePublishVolume's target_path (a directory for a
// mounted volume, a file for a block volume) and deletes it in NodeUnpublishVolume; in v0 the
// caller does both. So for a v0 driver the gateway, its caller, creates the path before
// publishing and removes it after unpublishing — which needs the gateway to see the node's
// paths as the driver does (the bridge deployment beside kubelet). A path whose parent the
// gateway cannot see is left to the driver.
//
// The gateway removes only paths it created itself, and only while they are an empty
// directory or an empty file: a caller's target_path never makes it delete anything else.

// createdPaths are the target paths the gateway created for a v0 driver and has not removed
// yet; safe for concurrent use.
type createdPaths struct {
	mu    sync.Mutex
	paths map[string]bool
}

// create makes target_path for a v1 NodePublishVolume before a v0 driver publishes there.
func (c *createdPaths) create(r *csi.NodePublishVolumeRequest) error {
	p := r.GetTargetPath()
	if p == "" {
		return nil // the driver (or validation) refuses it
	}
	var err error
	if r.GetVolumeCapability().GetBlock() != nil {
		var f *os.File
		if f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640); err == nil {
			err = f.Close()
		}
	} else {
		err = os.Mkdir(p, 0o750)
	}
	switch {
	case err == nil:
		c.mu.Lock()
		if c.paths == nil {
			c.paths = map[string]bool{}
		}
		c.paths[p] = true
		c.mu.Unlock()
		return nil
	case errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return &crossError{class: backends.ClassInternal, msg: "creating target_path for the v0 driver (in v0 the caller creates it): " + err.Error()}
}

// remove deletes target_path after a v0 driver unpublished it, when the gateway created it
// and it is still an empty directory or an empty file.
func (c *createdPaths) remove(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paths[path] {
		return
	}
	info, err := os.Lstat(path)
	if err == nil && (info.IsDir() || (info.Mode().IsRegular() && info.Size() == 0)) {
		err = os.Remove(path) // a directory still mounted or not empty stays
	}
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		delete(c.paths, path)
	}
}

// targetCreatedFirst is v1's NodePublishVolume on a v0 driver (publish): the target path
// created first.
func targetCreatedFirst(publish rpc) rpc {
	return rpc{call: func(ctx context.Context, b *Backend, raw []byte) ([]byte, error) {
		var req csi.NodePublishVolumeRequest
		if err := proto.Unmarshal(raw, &req); err == nil {
			if err := b.targets.create(&req); err != nil {
				return b.refusal(err)
			}
		}
		return publish.call(ctx, b, raw)
	}}
}

// targetRemovedAfter is v1's NodeUnpublishVolume on a v0 driver (unpublish): the target
// path the gateway created removed after the driver unpublished it.
func targetRemovedAfter(unpublish rpc) rpc {
	return rpc{call: func(ctx context.Context, b *Backend, raw []byte) ([]byte, error) {
		resp, err := unpublish.call(ctx, b, raw)
		if err == nil {
			var req csi.NodeUnpublishVolumeRequest
			if proto.Unmarshal(raw, &req) == nil {
				b.targets.remove(req.GetTargetPath())
			}
		}
		return resp, err
	}}
}
