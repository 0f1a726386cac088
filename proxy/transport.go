package proxy

import (
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/csi-gateway/csi-gateway/internal/h2grpc"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

// Transport is how a listener reads and writes gRPC.
type Transport string

const (
	// TransportFrames is the gateway's own HTTP/2 frame reader and writer (internal/h2grpc):
	// one goroutine reads a connection's frames, a call's handler writes its whole answer in
	// one write, and nothing else sits between them.
	TransportFrames Transport = "frames"
	// TransportGRPC is grpc-go's server.
	TransportGRPC Transport = "grpc"
	// DefaultTransport is grpc-go's: what kubelet and every CSI sidecar speak, with HTTP/2
	// defences maintained upstream. Frames is an opt-in where CPU per call matters.
	DefaultTransport = TransportGRPC
)

// ParseTransport reads a transport's name; empty is DefaultTransport.
func ParseTransport(s string) (Transport, error) {
	switch Transport(s) {
	case "":
		return DefaultTransport, nil
	case TransportFrames, TransportGRPC:
		return Transport(s), nil
	}
	return "", fmt.Errorf("%q is not frames or grpc", s)
}

// UnmarshalText parses the transport key (see ParseTransport), so that the configuration
// holds a Transport, read once.
func (t *Transport) UnmarshalText(text []byte) error {
	v, err := ParseTransport(string(text))
	if err == nil {
		*t = v
	}
	return err
}

// listenerServer serves one listener: a *grpc.Server or an *h2grpc.Server.
type listenerServer interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// streamWorkers is how many goroutines each listener keeps to run calls on. A call on a
// fresh goroutine grows its stack through the middleware chain and the backend call every
// time (about a sixth of the gateway's CPU per call); workers keep theirs. Beyond this many
// concurrent calls, a goroutine is started per call as usual.
const streamWorkers = 32

// newListenerServer returns the server of one listener on the configured transport: every
// call goes to handler, with creds' handshake, the stats handlers and Options.Limits.
func (s *Server) newListenerServer(creds credentials.TransportCredentials, handler grpc.StreamHandler) listenerServer {
	if s.opts.Transport == TransportGRPC {
		opts := []grpc.ServerOption{
			grpc.NumStreamWorkers(streamWorkers),
			grpc.ForceServerCodecV2(rawcodec.Codec{}),
		}
		opts = append(opts, s.opts.Limits.grpcOptions(creds, handler, s.opts.Log)...)
		for _, h := range s.opts.StatsHandlers {
			opts = append(opts, grpc.StatsHandler(h))
		}
		return grpc.NewServer(opts...)
	}
	cfg := h2grpc.ServerConfig{
		Creds:         creds,
		Handler:       handler,
		Codec:         rawcodec.Codec{},
		StatsHandlers: s.opts.StatsHandlers,
		Workers:       streamWorkers,
	}
	s.opts.Limits.h2grpcConfig(&cfg)
	return h2grpc.NewServer(cfg)
}
