package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// dirLock is an exclusive flock on a file in the data directory, so that two appliances never
// share one. The kernel drops it when the process dies, so a kill -9 leaves no stale lock.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another appliance", dir)
		}
		return nil, err
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	return l.f.Close() // closing the descriptor drops the flock
}
