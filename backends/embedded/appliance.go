package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-addons/spec/lib/go/volumegroup"
	"google.golang.org/grpc"
)

// Appliance is one reference appliance bound to a data directory. Only one Appliance (one
// process) may use a data directory at a time; Open takes a lock file to make sure.
type Appliance struct {
	cfg    Config
	log    *slog.Logger
	images *images
	lock   *dirLock

	// mu serializes every change of the state and guards live. Controller calls hold it for
	// their whole run: they are quick (sparse files, metadata), and holding it makes each
	// call atomic with respect to every other one.
	mu   sync.Mutex
	live *state

	node *nodeService
}

// Open opens (or creates) the appliance in cfg.DataDir, removes data files that a crash left
// behind, and returns it ready to serve. Close releases it.
func Open(cfg Config, log *slog.Logger) (*Appliance, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	im, err := newImages(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s, err := loadState(cfg.DataDir)
	if err != nil {
		lock.release()
		return nil, err
	}
	removed, err := im.collectGarbage(s)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("remove leftovers in %s: %w", cfg.DataDir, err)
	}
	if len(removed) > 0 {
		log.Info("removed data files no volume or snapshot names (left by an interrupted call)", "files", removed)
	}
	a := &Appliance{cfg: cfg, log: log, images: im, lock: lock, live: s}
	a.node = newNodeService(a)
	return a, nil
}

// Close releases the data directory. Calls still running may fail.
func (a *Appliance) Close() error {
	return a.lock.release()
}

// Config returns the configuration in force, defaults filled in.
func (a *Appliance) Config() Config { return a.cfg }

// Register registers every service of the appliance on r: Identity, Controller,
// GroupController, Node and the csi-addons VolumeGroup controller.
func (a *Appliance) Register(r grpc.ServiceRegistrar) {
	csi.RegisterIdentityServer(r, &identityServer{a: a})
	csi.RegisterControllerServer(r, &controllerServer{a: a})
	csi.RegisterGroupControllerServer(r, &groupControllerServer{a: a})
	csi.RegisterNodeServer(r, a.node)
	volumegroup.RegisterControllerServer(r, &volumeGroupServer{a: a})
}

// update runs fn on a copy of the state while holding the lock. When fn succeeds, the copy is
// written to disk and becomes the live state; when fn or the write fails, nothing changes.
func (a *Appliance) update(fn func(s *state) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := a.live.clone()
	if err := fn(next); err != nil {
		return err
	}
	if err := saveState(a.cfg.DataDir, next); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	a.live = next
	return nil
}

// view runs fn on the live state while holding the lock; fn must not change it.
func (a *Appliance) view(fn func(s *state) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fn(a.live)
}

// newID returns a fresh random ID with the given prefix, such as "vol-3f9c0a1b2c3d4e5f".
func newID(prefix string) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic("embedded: no randomness: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return prefix + hex.EncodeToString(b)
}
