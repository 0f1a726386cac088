package main

import (
	"context"
	"errors"
	"net"
	"os"
)

// stoppableServer is a gRPC server the bench runs in a process of its own: grpc.Server (the
// driver) or h2grpc.Server (the floor relay).
type stoppableServer interface {
	Serve(net.Listener) error
	Stop()
}

// serveUnix serves srv on a Unix socket at path until ctx ends, then stops it and removes the
// socket. stopped is the error srv's Serve returns once stopped, which is not a failure.
func serveUnix(ctx context.Context, path string, srv stoppableServer, stopped error) error {
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, stopped) {
		return err
	}
	return nil
}
