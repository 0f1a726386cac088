package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/csi-gateway/csi-gateway/proxy"
)

// startAdmin serves the admin endpoints on addr (host:port) until the returned server is
// closed; a failure to serve later is sent on errc, which stops the gateway.
func startAdmin(addr string, h http.Handler, errc chan<- error) (*http.Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin.listen: %w", err)
	}
	// No WriteTimeout: the tap is a long-lived stream.
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin listener %s: %w", addr, err)
		}
	}()
	return hs, nil
}

// stopAdmin ends the tap's streams (each writes what it holds, then ends) and shuts the admin
// server down, giving requests in progress two seconds.
func stopAdmin(hs *http.Server, tap *proxy.Tap) {
	tap.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if hs.Shutdown(ctx) != nil {
		hs.Close()
	}
}
