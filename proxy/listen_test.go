package proxy

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// listenUnixEndpoint is a Unix socket endpoint at path.
func listenUnixEndpoint(path string) Endpoint { return Endpoint{Scheme: "unix", Address: path} }

// listenDial connects to the socket at path, failing the test when nothing answers.
func listenDial(t *testing.T, path string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	c.Close()
}

func TestListenSocketMode(t *testing.T) {
	if DefaultSocketMode != 0o660 {
		t.Errorf("DefaultSocketMode = %v, want 0660 (owner and group)", DefaultSocketMode)
	}
	for _, mode := range []fs.FileMode{0o660, 0o600} {
		t.Run(mode.String(), func(t *testing.T) {
			// The socket's directory does not exist yet: Listen creates it.
			path := filepath.Join(t.TempDir(), "plugins", "csi.sock")
			l, err := Listen(listenUnixEndpoint(path), mode)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&fs.ModeSocket == 0 {
				t.Errorf("%s is %v, want a socket", path, fi.Mode())
			}
			if got := fi.Mode().Perm(); got != mode {
				t.Errorf("socket mode = %v, want %v", got, mode)
			}
			listenDial(t, path)
		})
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	// A listener closed without unlinking its file: what a process that died leaves behind.
	old, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the stale socket is not there: %v", err)
	}

	l, err := Listen(listenUnixEndpoint(path), 0o600)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer l.Close()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s is %v, want a socket with mode 0600", path, fi.Mode())
	}
	listenDial(t, path)
}

func TestListenRefuses(t *testing.T) {
	tests := []struct {
		name string
		// setup puts something at path and returns a check that it was left in place.
		setup   func(t *testing.T, path string) (check func(t *testing.T))
		wantErr string // %s is the path
	}{
		{
			name: "live socket",
			setup: func(t *testing.T, path string) func(t *testing.T) {
				live, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { live.Close() })
				return func(t *testing.T) { listenDial(t, path) } // still answering
			},
			wantErr: "%s is in use: another process answers on it",
		},
		{
			name: "symlink to a stale socket",
			setup: func(t *testing.T, path string) func(t *testing.T) {
				target := filepath.Join(filepath.Dir(path), "elsewhere.sock")
				stale, err := net.Listen("unix", target)
				if err != nil {
					t.Fatal(err)
				}
				stale.(*net.UnixListener).SetUnlinkOnClose(false)
				stale.Close()
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if got, err := os.Readlink(path); err != nil || got != target {
						t.Errorf("the symlink was not left in place: %q, %v", got, err)
					}
					if fi, err := os.Lstat(target); err != nil || fi.Mode()&fs.ModeSocket == 0 {
						t.Errorf("the symlink's target was touched: %v, %v", fi, err)
					}
				}
			},
			wantErr: "%s is a symlink; refusing to listen there (remove it if it is yours)",
		},
		{
			name: "dangling symlink",
			setup: func(t *testing.T, path string) func(t *testing.T) {
				if err := os.Symlink("/nonexistent/csi.sock", path); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if got, err := os.Readlink(path); err != nil || got != "/nonexistent/csi.sock" {
						t.Errorf("the symlink was not left in place: %q, %v", got, err)
					}
				}
			},
			wantErr: "%s is a symlink; refusing to listen there (remove it if it is yours)",
		},
		{
			name: "regular file",
			setup: func(t *testing.T, path string) func(t *testing.T) {
				if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
						t.Errorf("the file was not left in place: %q, %v", b, err)
					}
				}
			},
			wantErr: "%s exists and is not a socket; refusing to replace it",
		},
		{
			name: "directory",
			setup: func(t *testing.T, path string) func(t *testing.T) {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
						t.Errorf("the directory was not left in place: %v, %v", fi, err)
					}
				}
			},
			wantErr: "%s exists and is not a socket; refusing to replace it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "csi.sock")
			check := tt.setup(t, path)
			l, err := Listen(listenUnixEndpoint(path), 0o660)
			if err == nil {
				l.Close()
				t.Fatal("Listen succeeded")
			}
			if want := fmt.Sprintf(tt.wantErr, path); err.Error() != want {
				t.Errorf("Listen error = %q, want %q", err, want)
			}
			check(t)
		})
	}
}

func TestListenCloseRemovesSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	l, err := Listen(listenUnixEndpoint(path), DefaultSocketMode)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, Lstat(%s) = %v; want the socket removed", path, err)
	}
	// The path is free again.
	l, err = Listen(listenUnixEndpoint(path), DefaultSocketMode)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	l.Close()
}

func TestListenTCP(t *testing.T) {
	l, err := Listen(Endpoint{Scheme: "tcp", Address: "127.0.0.1:0"}, DefaultSocketMode)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
