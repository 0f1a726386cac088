// Package e2e holds end-to-end tests that run the real csi-gateway binary against real
// sockets, files and (as root) mounts. It has no code of its own.
package e2e
