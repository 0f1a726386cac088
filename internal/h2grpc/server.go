package h2grpc

import (
	"cmp"
	"errors"
	"math"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/stats"
)

const (
	defaultMaxRecvMsgSize = 4 << 20
	defaultMaxStreams     = 1000
	// defaultKeepaliveMinTime is grpc-go's keepalive.EnforcementPolicy.MinTime default.
	defaultKeepaliveMinTime = 5 * time.Minute
	// defaultMaxStreamResetsPerSecond is the reset budget of a connection whose server
	// configuration sets none.
	defaultMaxStreamResetsPerSecond = 200
	// defaultHandshakeTimeout is grpc-go's connection timeout.
	defaultHandshakeTimeout = 120 * time.Second
	// drainReadTimeout bounds how long a drained connection waits for the client to close
	// before closing it (closing at once could reset data the client has not read yet).
	drainReadTimeout = time.Second
	// closeWriteTimeout bounds the last write (a GOAWAY) to a connection closed for an error.
	closeWriteTimeout = time.Second
)

// ErrServerStopped is what Serve returns when called after Stop or GracefulStop.
var ErrServerStopped = errors.New("h2grpc: the server has been stopped")

// ServerConfig is a Server's configuration. Creds and Handler are required.
type ServerConfig struct {
	// Creds makes the transport handshake of each accepted connection (TLS with ALPN h2, the
	// gateway's Unix peer credentials, insecure.NewCredentials() in tests).
	Creds credentials.TransportCredentials
	// Handler serves every method, like grpc.UnknownServiceHandler; its srv is nil.
	Handler grpc.StreamHandler
	// Codec marshals what ServerStream.SendMsg and RecvMsg get; nil means grpc's proto codec.
	Codec encoding.CodecV2
	// StatsHandlers see each call as grpc-go's server reports it (TagRPC, InHeader, Begin,
	// InPayload, OutHeader, OutPayload, OutTrailer, End) and each connection (TagConn,
	// ConnBegin, ConnEnd).
	StatsHandlers []stats.Handler
	// Workers is how many goroutines are kept to run handlers; a stream finding them all busy
	// gets a goroutine of its own. 0: a goroutine per stream.
	Workers int
	// MaxConcurrentStreams is announced to clients; streams beyond it are refused with
	// RST_STREAM(REFUSED_STREAM). 0 means 1000.
	MaxConcurrentStreams uint32
	// MaxRecvMsgSize (default 4 MiB) and MaxSendMsgSize (default math.MaxInt32) bound a
	// message; beyond them the call fails with ResourceExhausted.
	MaxRecvMsgSize int
	MaxSendMsgSize int
	// MaxFrameSize is the SETTINGS_MAX_FRAME_SIZE announced and the largest frame read: a
	// client that sends a larger one loses the connection (GOAWAY FRAME_SIZE_ERROR) before
	// its payload is read, so no read buffer grows past it. 0 means 16384, the HTTP/2
	// default; it is raised to 16384 and capped at 1<<24-1, HTTP/2's bounds.
	MaxFrameSize uint32
	// MaxHeaderListSize is the SETTINGS_MAX_HEADER_LIST_SIZE announced: a request whose
	// header block decodes (hpack-counted: each field's name and value plus 32) to more is
	// refused with RST_STREAM(FRAME_SIZE_ERROR), and one whose encoded block goes on far past
	// it loses the connection. 0 means 16 MiB, grpc-go's default.
	MaxHeaderListSize uint32
	// KeepaliveMinTime is the shortest interval allowed between a client's PINGs, as
	// grpc-go's keepalive.EnforcementPolicy.MinTime (with PermitWithoutStream): after more
	// than two PINGs closer than that (counting anew at each new stream), the connection
	// gets GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings") and is closed. 0 means 5 minutes,
	// grpc-go's default.
	KeepaliveMinTime time.Duration
	// FirstMessageTimeout bounds how long a call's first request message (or the end of
	// the client's side) may take to arrive after its headers; later, the stream is reset
	// (RST_STREAM CANCEL) and the handler's RecvMsg fails with DeadlineExceeded. The call's
	// own deadline still applies when it is sooner. 0: no bound but the call's deadline.
	FirstMessageTimeout time.Duration
	// WriteTimeout bounds how long a handler's write may wait for the client to open
	// flow-control window without being granted any; then the stream is reset (RST_STREAM
	// CANCEL) and SendMsg fails with DeadlineExceeded, so a client that does not read
	// cannot hold a handler. 0: no bound but the call's deadline.
	WriteTimeout time.Duration
	// MaxStreamResetsPerSecond is each connection's h2limit.ResetBudget: a client that resets
	// streams (RST_STREAM) faster, beyond a burst of as many, loses the connection
	// (GOAWAY(ENHANCE_YOUR_CALM, "too_many_resets")), against the rapid-reset attack. 0 means
	// 200.
	MaxStreamResetsPerSecond int
	// HandshakeTimeout bounds the transport handshake of an accepted connection (TLS, peer
	// credentials), and then the client's HTTP/2 preface, like grpc.ConnectionTimeout. 0 means
	// 120 seconds, grpc-go's default.
	HandshakeTimeout time.Duration
}

// Server accepts gRPC connections and runs Handler for every call. Its methods are safe for
// concurrent use.
type Server struct {
	cfg   ServerConfig
	codec encoding.CodecV2
	sh    statsHandlers
	work  chan *ServerStream // nil without workers

	mu      sync.Mutex
	lis     map[net.Listener]struct{}
	conns   map[*serverConn]struct{}
	stopped bool // no more listeners or connections
	drain   bool // GracefulStop: connections get GOAWAY

	serveWG, connWG, handlerWG, workerWG sync.WaitGroup
	stopWorkers                          sync.Once
}

// positiveOr sets *v to def unless it is positive: the default of a configuration field
// left zero.
func positiveOr[T cmp.Ordered](v *T, def T) {
	var zero T
	if *v <= zero {
		*v = def
	}
}

// NewServer returns a server for cfg, with defaults filled in. It starts cfg.Workers
// goroutines, which Stop and GracefulStop end.
func NewServer(cfg ServerConfig) *Server {
	positiveOr(&cfg.MaxConcurrentStreams, defaultMaxStreams)
	positiveOr(&cfg.MaxRecvMsgSize, defaultMaxRecvMsgSize)
	positiveOr(&cfg.MaxSendMsgSize, math.MaxInt32)
	cfg.MaxFrameSize = min(max(cfg.MaxFrameSize, defaultMaxFrameSize), 1<<24-1)
	positiveOr(&cfg.MaxHeaderListSize, maxHeaderListSize)
	positiveOr(&cfg.HandshakeTimeout, defaultHandshakeTimeout)
	positiveOr(&cfg.MaxStreamResetsPerSecond, defaultMaxStreamResetsPerSecond)
	positiveOr(&cfg.KeepaliveMinTime, defaultKeepaliveMinTime)
	s := &Server{
		cfg:   cfg,
		codec: codecOrProto(cfg.Codec),
		sh:    statsHandlers(cfg.StatsHandlers),
		lis:   make(map[net.Listener]struct{}),
		conns: make(map[*serverConn]struct{}),
	}
	if cfg.Workers > 0 {
		s.work = make(chan *ServerStream)
		s.workerWG.Add(cfg.Workers)
		for range cfg.Workers {
			go func() {
				defer s.workerWG.Done()
				for st := range s.work {
					st.run()
				}
			}()
		}
	}
	return s
}

// Serve accepts connections on l until Stop or GracefulStop, which close l; it then returns
// nil. Another Accept error closes l and is returned (temporary ones are retried with
// backoff). After a stop it closes l and returns ErrServerStopped.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		l.Close()
		return ErrServerStopped
	}
	s.lis[l] = struct{}{}
	s.serveWG.Add(1)
	s.mu.Unlock()
	defer s.serveWG.Done()

	var delay time.Duration
	for {
		raw, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			stopped := s.stopped
			s.mu.Unlock()
			if stopped {
				return nil
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			s.mu.Lock()
			delete(s.lis, l)
			s.mu.Unlock()
			l.Close()
			return err
		}
		delay = 0
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			raw.Close()
			return nil
		}
		s.connWG.Add(1)
		s.mu.Unlock()
		go s.serveConn(raw)
	}
}

// serveConn makes the transport handshake of raw and serves the connection until it ends.
func (s *Server) serveConn(raw net.Conn) {
	defer s.connWG.Done()
	_ = raw.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	nc, auth, err := s.cfg.Creds.ServerHandshake(raw)
	if err != nil {
		raw.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	sc := newServerConn(s, nc, auth)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	sc.serve()
	s.mu.Lock()
	delete(s.conns, sc)
	s.mu.Unlock()
}

// dispatch runs st's handler on an idle worker, or on a goroutine of its own.
func (s *Server) dispatch(st *ServerStream) {
	s.handlerWG.Add(1)
	if s.work != nil {
		select {
		case s.work <- st:
			return
		default:
		}
	}
	go st.run()
}

// GracefulStop stops accepting connections (closing the listeners), sends GOAWAY on every
// connection, waits for the calls in flight to finish and for the connections to close, and
// ends the workers. Calls arriving meanwhile are refused (REFUSED_STREAM, which clients
// retry elsewhere).
func (s *Server) GracefulStop() {
	s.stop(true)
}

// Stop closes the listeners and every connection at once: handlers' contexts are cancelled
// and calls in flight fail on the client. It waits for the handlers to return.
func (s *Server) Stop() {
	s.stop(false)
}

func (s *Server) stop(graceful bool) {
	s.mu.Lock()
	s.stopped = true
	s.drain = s.drain || graceful
	for l := range s.lis {
		l.Close()
	}
	clear(s.lis)
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		if graceful {
			sc.goAway()
		} else {
			sc.close()
		}
	}
	s.serveWG.Wait()
	s.connWG.Wait()
	s.handlerWG.Wait()
	s.stopWorkers.Do(func() {
		if s.work != nil {
			close(s.work)
		}
	})
	s.workerWG.Wait()
}
