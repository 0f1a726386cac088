package proxy

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DefaultSocketMode is the permission of a Unix socket the gateway creates: owner and group.
const DefaultSocketMode fs.FileMode = 0o660

// Listen opens a listener on e. A Unix socket gets the given mode before Listen returns, so no
// client can connect while it is more open than asked; an old socket file is replaced only
// when nothing answers on it, and a symlink, or anything else that is not a socket, is
// refused rather than removed.
//
// The caller closes the listener; for a Unix socket, closing it removes the socket file.
func Listen(e Endpoint, mode fs.FileMode) (net.Listener, error) {
	if e.Scheme == "tcp" {
		return net.Listen("tcp", e.Address)
	}
	if err := removeStaleSocket(e.Address); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(e.Address), 0o750); err != nil {
		return nil, fmt.Errorf("create the socket's directory: %w", err)
	}
	// The socket is created with umask 0177 (0600) and widened to mode below, so it is never
	// open to more callers than asked for, even for an instant.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", e.Address)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(e.Address, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("set mode %v on %s: %w", mode, e.Address, err)
	}
	return l, nil
}

// removeStaleSocket removes a socket file left by a process that died, and refuses to touch
// anything else at path.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symlink; refusing to listen there (remove it if it is yours)", path)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s is in use: another process answers on it", path)
	}
	return os.Remove(path)
}
