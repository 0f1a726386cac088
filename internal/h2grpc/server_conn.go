package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/h2limit"
)

// serverConn is one accepted connection. Its reader goroutine (serve) reads every frame,
// starts a stream per request and hands it to the server's workers.
type serverConn struct {
	h2conn
	srv    *Server
	ctx    context.Context // carries the peer; cancelled when the connection ends
	cancel context.CancelFunc
	peer   *peer.Peer

	maxID atomic.Uint32 // highest client stream id seen
	// handlers counts the connection's handlers still running, reset streams included: a
	// client that opens and resets streams at once (CVE-2023-44487, "rapid reset") must not
	// get more running than MaxConcurrentStreams.
	handlers atomic.Int32
	resets   h2limit.ResetBudget // the client's RST_STREAMs; reader goroutine only
	draining atomic.Bool         // GOAWAY sent
	drained  atomic.Bool         // draining and the last stream ended

	// Keepalive enforcement (ServerConfig.KeepaliveMinTime); reader goroutine only.
	lastPing    time.Time
	pingStrikes int
	// gaps are the last ranges of client stream ids skipped when a stream opened with an id
	// more than 2 above the previous one (gRPC clients skip none); reader goroutine only.
	gaps [maxGaps][2]uint32
	nGap int
	// closed are the last streams closed by both sides' END_STREAM or by the client's
	// RST_STREAM: a DATA frame the client sends on one is a connection error (STREAM_CLOSED),
	// unlike on a stream the server reset, whose client may not have learned it yet. Under
	// h2conn.mu.
	closed  [maxClosed]uint32
	nClosed int
}

// maxClosed is how many closed streams a connection remembers (see serverConn.closed); a
// DATA frame on one closed longer ago is dropped like one on a stream the server reset.
const maxClosed = 16

// noteClosed records that stream id is closed on both sides.
func (sc *serverConn) noteClosed(id uint32) {
	sc.mu.Lock()
	sc.closed[sc.nClosed%maxClosed] = id
	sc.nClosed++
	sc.mu.Unlock()
}

// wasClosed reports whether stream id is among the recorded closed streams.
func (sc *serverConn) wasClosed(id uint32) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, c := range sc.closed[:min(sc.nClosed, maxClosed)] {
		if c == id {
			return true
		}
	}
	return false
}

// maxGaps is how many skipped ranges a connection remembers: enough to tell a client that
// goes back to a skipped id (PROTOCOL_ERROR) from one that reuses a closed stream
// (STREAM_CLOSED) in every case but a client that skips ids over and over.
const maxGaps = 4

// noteSkipped records the ids a new stream id skips.
func (sc *serverConn) noteSkipped(id uint32) {
	if lo := sc.maxID.Load() + 2; id > lo {
		sc.gaps[sc.nGap%maxGaps] = [2]uint32{lo, id - 2}
		sc.nGap++
	}
}

// skipped reports whether id is among the recorded skipped ids.
func (sc *serverConn) skipped(id uint32) bool {
	for _, g := range sc.gaps[:min(sc.nGap, maxGaps)] {
		if g[0] <= id && id <= g[1] {
			return true
		}
	}
	return false
}

// maxPingStrikes is how many PINGs closer than KeepaliveMinTime a connection may send before
// it is closed (grpc-go's number).
const maxPingStrikes = 2

// errTooManyPings ends a connection whose client pings more often than KeepaliveMinTime.
var errTooManyPings = errors.New("too_many_pings")

// errTooManyResets ends a connection whose client resets streams faster than
// MaxStreamResetsPerSecond.
var errTooManyResets = errors.New(h2limit.ReasonTooManyResets)

func newServerConn(s *Server, nc net.Conn, auth credentials.AuthInfo) *serverConn {
	sc := &serverConn{srv: s, resets: h2limit.NewResetBudget(s.cfg.MaxStreamResetsPerSecond)}
	sc.init(nc, s.cfg.MaxFrameSize, s.cfg.MaxHeaderListSize)
	sc.peer = &peer.Peer{Addr: nc.RemoteAddr(), LocalAddr: nc.LocalAddr(), AuthInfo: auth}
	ctx := peer.NewContext(context.Background(), sc.peer)
	if len(s.sh) > 0 {
		ctx = s.sh.tagConn(ctx, &stats.ConnTagInfo{RemoteAddr: sc.peer.Addr, LocalAddr: sc.peer.LocalAddr})
	}
	sc.ctx, sc.cancel = context.WithCancel(ctx)
	return sc
}

// serve runs the connection: preface, SETTINGS, then frames until the connection ends. It
// returns once every stream of the connection has been told it ended.
func (sc *serverConn) serve() {
	if len(sc.srv.sh) > 0 {
		sc.srv.sh.handleConn(sc.ctx, &stats.ConnBegin{})
		defer sc.srv.sh.handleConn(sc.ctx, &stats.ConnEnd{})
	}
	defer sc.shutdown()
	var pre [len(http2.ClientPreface)]byte
	_ = sc.nc.SetReadDeadline(time.Now().Add(sc.srv.cfg.HandshakeTimeout))
	if _, err := io.ReadFull(sc.br, pre[:]); err != nil || !bytes.Equal(pre[:], []byte(http2.ClientPreface)) {
		return
	}
	_ = sc.nc.SetReadDeadline(time.Time{})
	if sc.writePreamble(false, sc.srv.cfg.MaxConcurrentStreams) != nil {
		return
	}
	if sc.srv.isDraining() {
		sc.goAway()
	}
	first := true
	err := readFrames(&sc.hr, func(f http2.Frame) error {
		if first {
			first = false
			if _, ok := f.(*http2.SettingsFrame); !ok {
				return http2.ConnectionError(http2.ErrCodeProtocol) // the preface's SETTINGS first
			}
		}
		return sc.handle(f)
	}, func(f http2.Frame, se http2.StreamError) {
		if f == nil && se.StreamID%2 == 1 && se.StreamID > sc.maxID.Load() {
			// A request whose header block was refused (an invalid field): its stream is
			// closed now, so the rest of its frames are not taken for an idle stream's.
			sc.noteSkipped(se.StreamID)
			sc.maxID.Store(se.StreamID)
		}
		sc.resetStream(se.StreamID, se.Code)
	})
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		sc.connError(http2.ErrCode(ce), "")
	case errors.Is(err, http2.ErrFrameTooLarge):
		sc.connError(http2.ErrCodeFrameSize, "")
	case err == errTooManyPings, err == errTooManyResets:
		sc.connError(http2.ErrCodeEnhanceYourCalm, err.Error())
	}
}

func (sc *serverConn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return sc.onHeaders(f)
	case *http2.DataFrame:
		return sc.onData(f)
	case *http2.RSTStreamFrame:
		if f.StreamID > sc.maxID.Load() {
			return http2.ConnectionError(http2.ErrCodeProtocol) // RST_STREAM on an idle stream
		}
		if !sc.resets.Spend(time.Now()) {
			return errTooManyResets
		}
		if st := sc.lookup(f.StreamID); st != nil {
			st.(*ServerStream).reset(status.FromContextError(context.Canceled).Err())
		}
		sc.noteClosed(f.StreamID) // the client will send nothing more on it
	case *http2.SettingsFrame:
		return sc.onSettings(f, nil)
	case *http2.PingFrame:
		if err := sc.enforceKeepalive(f); err != nil {
			return err
		}
		return sc.onPing(f)
	case *http2.WindowUpdateFrame:
		if f.StreamID > sc.maxID.Load() {
			return http2.ConnectionError(http2.ErrCodeProtocol) // WINDOW_UPDATE on an idle stream
		}
		return sc.onWindowUpdate(f)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol} // §5.3.1
		}
	case *http2.GoAwayFrame:
		// The client will open no more streams; those open finish normally.
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol) // clients must not push
	}
	return nil
}

func (sc *serverConn) onData(f *http2.DataFrame) error {
	if err := sc.onDataFlow(int(f.Length)); err != nil {
		return err
	}
	st := sc.lookup(f.StreamID)
	if st == nil {
		if f.StreamID > sc.maxID.Load() {
			return http2.ConnectionError(http2.ErrCodeProtocol) // DATA on an idle stream
		}
		if sc.wasClosed(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeStreamClosed) // §5.1, "closed"
		}
		return nil // a stream the server reset before the client knew
	}
	if code := st.core().rb.push(f.Data(), int(f.Length), f.StreamEnded()); code != http2.ErrCodeNo {
		return http2.StreamError{StreamID: f.StreamID, Code: code}
	}
	return nil
}

// resetStream sends RST_STREAM(code) and ends the stream, if open, with Internal.
func (sc *serverConn) resetStream(id uint32, code http2.ErrCode) {
	if st := sc.lookup(id); st != nil {
		st.(*ServerStream).reset(status.Errorf(codes.Internal, "stream reset: %v", code))
	}
	sc.queueRST(id, code)
}

// connError sends GOAWAY(code, debug) and closes the connection. The GOAWAY is flushed
// before the close (so the client learns why), within closeWriteTimeout: a writer stuck on a
// client that does not read fails then and leaves the write lock.
func (sc *serverConn) connError(code http2.ErrCode, debug string) {
	sc.w.queue(ctlFrame{kind: ctlGoAway, streamID: sc.maxID.Load(), code: code, debug: debug})
	_ = sc.nc.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
	sc.w.flushThen(func() {})
	sc.nc.Close()
}

// enforceKeepalive counts a PING that comes sooner than KeepaliveMinTime after the previous
// one as a strike, and fails with errTooManyPings past maxPingStrikes, as grpc-go's server
// does. As there, a PING after the server sent HEADERS or DATA clears the strikes: clients
// measure the bandwidth-delay product with PINGs answering data they receive.
func (sc *serverConn) enforceKeepalive(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	now := time.Now()
	defer func() { sc.lastPing = now }()
	if sc.w.sentStream.Load() {
		sc.w.sentStream.Store(false)
		sc.pingStrikes = 0
		return nil
	}
	if !sc.lastPing.IsZero() && now.Sub(sc.lastPing) < sc.srv.cfg.KeepaliveMinTime {
		sc.pingStrikes++
	}
	if sc.pingStrikes > maxPingStrikes {
		return errTooManyPings
	}
	return nil
}

func (sc *serverConn) onHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if st := sc.lookup(id); st != nil {
		// Trailers from the client: they must end the stream, on a stream the client has not
		// ended yet, and carry no pseudo-header (RFC 9113 §8.1).
		rb := &st.core().rb
		rb.mu.Lock()
		ended := rb.eof
		rb.mu.Unlock()
		switch {
		case ended:
			return http2.ConnectionError(http2.ErrCodeStreamClosed) // half-closed (remote)
		case !f.StreamEnded() || len(f.PseudoFields()) > 0:
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		rb.setEOF()
		return nil
	}
	if id%2 != 1 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if id <= sc.maxID.Load() {
		// Not a new stream: one that was skipped (a smaller id than one already used), or one
		// that is closed. gRPC clients send no HEADERS frame on a stream after its first.
		if sc.skipped(id) {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return http2.ConnectionError(http2.ErrCodeStreamClosed)
	}
	sc.noteSkipped(id)
	sc.maxID.Store(id)
	if f.HasPriority() && f.Priority.StreamDep == id {
		sc.queueRST(id, http2.ErrCodeProtocol) // a stream cannot depend on itself (§5.3.1)
		return nil
	}
	if sc.draining.Load() {
		sc.queueRST(id, http2.ErrCodeRefusedStream)
		return nil
	}
	if f.Truncated {
		sc.queueRST(id, http2.ErrCodeFrameSize)
		return nil
	}
	return sc.newStream(f)
}

// newStream validates a request's headers like grpc-go (answering a bad one at once, without
// the handler) and starts its stream.
func (sc *serverConn) newStream(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	st := &ServerStream{sc: sc}
	st.s.id = id
	st.s.rb.init()
	var (
		mdb        mdBuilder
		method     string
		isGRPC     bool
		badCT      string
		timeout    time.Duration
		hasTimeout bool
		headerErr  *status.Status
		protoErr   bool
		hasScheme  bool
	)
	for _, hf := range f.Fields {
		switch hf.Name {
		case "content-type":
			sub, ok := contentSubtype(hf.Value)
			if !ok {
				badCT = hf.Value
				break
			}
			isGRPC = true
			st.subtype = sub
			st.contentType = hf.Value
			if hf.Value != baseContentType && hf.Value[len(baseContentType)] != '+' {
				st.contentType = contentType(sub)
			}
			mdb.add(hf.Name, hf.Value, len(f.Fields))
		case "grpc-encoding":
			st.recvCompress = hf.Value
		case ":method":
			st.httpMethod = hf.Value
		case ":path":
			method = hf.Value
		case ":scheme":
			hasScheme = true
		case "te":
			protoErr = protoErr || hf.Value != "trailers" // the only TE value HTTP/2 allows
		case "grpc-timeout":
			hasTimeout = true
			var err error
			if timeout, err = decodeTimeout(hf.Value); err != nil {
				headerErr = status.Newf(codes.Internal, "malformed grpc-timeout: %v", err)
			}
		case "connection":
			protoErr = true
		default:
			if isReservedHeader(hf.Name) && !isKeptReservedHeader(hf.Name) {
				break
			}
			v, err := decodeMetadataValue(hf.Name, hf.Value)
			if err != nil {
				headerErr = status.Newf(codes.Internal, "malformed binary metadata %q in header %q: %v", hf.Value, hf.Name, err)
				break
			}
			mdb.add(hf.Name, v, len(f.Fields))
		}
	}
	md := mdb.md
	if md == nil {
		md = metadata.MD{}
	}
	end := f.StreamEnded()
	if len(md[":authority"]) > 1 || len(md["host"]) > 1 {
		sc.earlyAbort(id, st.subtype, status.New(codes.Internal, "both :authority and host must have only one value as per HTTP/2 spec"), 400, !end)
		return nil
	}
	// A malformed request (RFC 9113 §8.2.2, §8.3.1: a connection-specific field, a TE other
	// than "trailers", a missing :method, :scheme or :path, an empty :path) is a stream error.
	if protoErr || st.httpMethod == "" || method == "" || !hasScheme {
		sc.queueRST(id, http2.ErrCodeProtocol)
		return nil
	}
	if !isGRPC {
		sc.earlyAbort(id, "", status.Newf(codes.InvalidArgument, "invalid gRPC request content-type %q", badCT), 415, !end)
		return nil
	}
	if headerErr != nil {
		sc.earlyAbort(id, st.subtype, headerErr, 400, !end)
		return nil
	}
	if len(md[":authority"]) == 0 {
		if host, ok := md["host"]; ok {
			md[":authority"] = host
		}
	}
	delete(md, "host")
	if len(md[":authority"]) == 0 {
		sc.earlyAbort(id, st.subtype, status.New(codes.Internal, "no host or :authority header present"), 400, !end)
		return nil
	}
	if st.httpMethod != "POST" {
		sc.earlyAbort(id, st.subtype, status.Newf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", st.httpMethod), 405, !end)
		return nil
	}
	if hasTimeout && timeout <= 0 {
		sc.earlyAbort(id, st.subtype, status.New(codes.DeadlineExceeded, context.DeadlineExceeded.Error()), 200, !end)
		return nil
	}
	st.method = method
	st.md = md
	st.headerLen = int(f.Length)
	if end {
		st.s.rb.eof = true
	}

	sc.mu.Lock()
	if uint32(len(sc.streams)) >= sc.srv.cfg.MaxConcurrentStreams || sc.dead ||
		uint32(sc.handlers.Load()) >= sc.srv.cfg.MaxConcurrentStreams {
		sc.mu.Unlock()
		sc.queueRST(id, http2.ErrCodeRefusedStream)
		return nil
	}
	st.s.sendWin, st.s.winBase, st.s.winInit = sc.peerInitWin, sc.peerInitWin, true
	sc.streams[id] = st
	sc.mu.Unlock()
	if d := sc.srv.cfg.FirstMessageTimeout; d > 0 && !end {
		st.s.rb.mu.Lock() // the timer's function reads it under the lock
		st.s.rb.firstTimer = time.AfterFunc(d, st.firstMessageLate)
		st.s.rb.mu.Unlock()
	}

	var ctx context.Context
	if hasTimeout {
		ctx, st.cancel = context.WithTimeout(sc.ctx, timeout)
	} else {
		ctx, st.cancel = context.WithCancel(sc.ctx)
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	st.ctx = grpc.NewContextWithServerTransportStream(ctx, (*transportStream)(st))
	sc.handlers.Add(1)
	sc.srv.dispatch(st)
	return nil
}

// earlyAbort answers a request with one trailers-only HEADERS frame (HTTP status and gRPC
// status), then RST_STREAM(NO_ERROR) when the client has not ended its side, like grpc-go.
func (sc *serverConn) earlyAbort(id uint32, sub string, st *status.Status, httpStatus int, rst bool) {
	hf := []hpack.HeaderField{
		{Name: ":status", Value: strconv.Itoa(httpStatus)},
		{Name: "content-type", Value: contentType(sub)},
	}
	hf = appendStatusFields(hf, st)
	sc.w.queue(ctlFrame{kind: ctlHeaders, streamID: id, hf: hf, end: true, rstAfter: rst})
	if !rst {
		sc.noteClosed(id) // the client had ended its side: both have
	}
}

// streamDone takes an ended stream out of the table; on a draining connection the last one
// ends the connection.
func (sc *serverConn) streamDone(st *ServerStream) {
	_, left := sc.remove(&st.s)
	if left == 0 && sc.draining.Load() {
		sc.finishDrain()
	}
}

// goAway starts a graceful close: GOAWAY with the last stream id seen, then the connection
// closes once its streams have ended.
func (sc *serverConn) goAway() {
	if sc.draining.Swap(true) {
		return
	}
	sc.w.lock()
	if sc.w.err == nil {
		if err := sc.w.fr.WriteGoAway(sc.maxID.Load(), http2.ErrCodeNo, nil); err != nil {
			sc.w.failLocked(err)
		}
	}
	sc.w.unlock(true)
	sc.mu.Lock()
	left := len(sc.streams)
	sc.mu.Unlock()
	if left == 0 {
		sc.finishDrain()
	}
}

// finishDrain flushes, half-closes the connection so the client reads everything and then
// sees EOF, and gives the client drainReadTimeout to close its side.
func (sc *serverConn) finishDrain() {
	if sc.drained.Swap(true) {
		return
	}
	sc.w.flushThen(func() {
		if cw, ok := sc.nc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	})
	_ = sc.nc.SetReadDeadline(time.Now().Add(drainReadTimeout))
}

// close ends the connection now (Stop).
func (sc *serverConn) close() { sc.nc.Close() }

// shutdown, when the reader ends, fails the streams still open and cancels their contexts.
func (sc *serverConn) shutdown() {
	for _, st := range sc.markDead() {
		st.(*ServerStream).s.rb.abort(status.FromContextError(context.Canceled).Err())
	}
	sc.cancel()
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drain
}
