package h2grpc

import (
	"context"
	"io"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

var errIllegalHeaderWrite = status.Error(codes.Internal, "transport: SendHeader called multiple times")

// ServerStream is one call on the server: the grpc.ServerStream the handler gets. Its
// Context carries the incoming metadata, the peer, the deadline from grpc-timeout and a
// grpc.ServerTransportStream (so grpc.MethodFromServerStream, grpc.SetHeader, grpc.SendHeader
// and grpc.SetTrailer work); it is cancelled when the client resets the stream, the
// connection ends or the handler returns. As in grpc-go, one goroutine may call SendMsg while
// another calls RecvMsg.
type ServerStream struct {
	s      streamCore
	sc     *serverConn
	ctx    context.Context
	cancel context.CancelFunc

	method       string
	md           metadata.MD
	subtype      string
	contentType  string // as sent back: normalized application/grpc[+subtype]
	recvCompress string
	httpMethod   string
	headerLen    int

	hmu        sync.Mutex
	header     metadata.MD
	trailer    metadata.MD
	headerSent bool
	done       bool // trailers written, or stream reset
	sent       int  // messages sent

	bufs   [1]mem.Buffer
	trlArr [5]hpack.HeaderField
}

var _ grpc.ServerStream = (*ServerStream)(nil)

func (st *ServerStream) core() *streamCore { return &st.s }

// Method returns the call's full method name, "/service/method".
func (st *ServerStream) Method() string { return st.method }

// Context returns the call's context; see ServerStream.
func (st *ServerStream) Context() context.Context { return st.ctx }

// SetHeader adds md to the response headers, sent with the first message or at the end.
// It fails once the headers were sent.
func (st *ServerStream) SetHeader(md metadata.MD) error {
	if add, err := metadataToAdd(md); !add {
		return err
	}
	st.hmu.Lock()
	defer st.hmu.Unlock()
	if st.headerSent || st.done {
		return errIllegalHeaderWrite
	}
	st.header = metadata.Join(st.header, md)
	return nil
}

// SendHeader sends the response headers (with md added) now; a second call fails.
func (st *ServerStream) SendHeader(md metadata.MD) error {
	if err := validateMetadata(md); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	st.hmu.Lock()
	if st.headerSent || st.done {
		st.hmu.Unlock()
		return errIllegalHeaderWrite
	}
	st.headerSent = true
	if md.Len() > 0 {
		st.header = metadata.Join(st.header, md)
	}
	hdr := st.headerFieldsLocked()
	st.hmu.Unlock()
	if err := st.sc.writeMsg(&st.s, &outFrames{hdr: hdr, now: true}, st.ctx.Done()); err != nil {
		return st.writeError(err)
	}
	st.outHeaderStats()
	return nil
}

// SetTrailer adds md to the trailers sent when the handler returns.
func (st *ServerStream) SetTrailer(md metadata.MD) { _ = (*transportStream)(st).SetTrailer(md) }

// SendMsg marshals m with the server's codec and sends it (with the headers first, if not
// sent yet). It blocks while the client's flow-control window is closed, until the stream
// ends. The first message is flushed "soon" (within flushDelay) unless the handler returns
// first, so a unary response leaves in one write with its trailers; later messages are
// flushed at once.
func (st *ServerStream) SendMsg(m any) error {
	srv := st.sc.srv
	bs, err := srv.codec.Marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	defer bs.Free()
	p := payloadBytes(bs)
	if len(p) > srv.cfg.MaxSendMsgSize {
		return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", len(p), srv.cfg.MaxSendMsgSize)
	}
	st.hmu.Lock()
	if st.done {
		st.hmu.Unlock()
		return st.writeError(errStreamDone)
	}
	var hdr []hpack.HeaderField
	if !st.headerSent {
		st.headerSent = true
		hdr = st.headerFieldsLocked()
	}
	// The first message is flushed soon: a unary handler returns right after it, and the
	// trailers then leave in the same write. Any later one means a stream, whose messages
	// the client waits for one by one: it goes at once (with the first, if still buffered).
	now := st.sent > 0
	st.sent++
	st.hmu.Unlock()
	o := outFrames{hdr: hdr, msg: p, hasMsg: true, now: now, stallLimit: srv.cfg.WriteTimeout}
	if err := st.sc.writeMsg(&st.s, &o, st.ctx.Done()); err != nil {
		return st.writeError(err)
	}
	if len(srv.sh) > 0 {
		if hdr != nil {
			st.outHeaderStats()
		}
		srv.sh.handleRPC(st.ctx, &stats.OutPayload{Payload: m, Length: len(p), CompressedLength: len(p), WireLength: len(p) + msgHeaderLen, SentTime: time.Now()})
	}
	return nil
}

// RecvMsg reads the next request message into m. It returns io.EOF once the client ended
// its side cleanly, and a status error otherwise (Canceled or DeadlineExceeded when the call
// ended, ResourceExhausted for a message over MaxRecvMsgSize, Internal for a malformed one).
func (st *ServerStream) RecvMsg(m any) error {
	srv := st.sc.srv
	msg, compressed, err := st.sc.readMsg(&st.s, srv.cfg.MaxRecvMsgSize, st.ctx.Done())
	if err != nil {
		switch err {
		case io.EOF:
			return io.EOF
		case io.ErrUnexpectedEOF:
			return status.Error(codes.Internal, io.ErrUnexpectedEOF.Error())
		case errDone:
			return status.FromContextError(st.ctx.Err()).Err()
		}
		return err
	}
	if compressed {
		if rc := st.recvCompress; rc == "" || rc == "identity" {
			return status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
		}
		return status.Errorf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", st.recvCompress)
	}
	st.bufs[0] = mem.SliceBuffer(msg)
	err = srv.codec.Unmarshal(st.bufs[:], m)
	st.bufs[0] = nil
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	if len(srv.sh) > 0 {
		srv.sh.handleRPC(st.ctx, &stats.InPayload{RecvTime: time.Now(), Payload: m, Length: len(msg), CompressedLength: len(msg), WireLength: len(msg) + msgHeaderLen})
	}
	return nil
}

// run calls the handler and ends the stream with its result.
func (st *ServerStream) run() {
	srv := st.sc.srv
	defer srv.handlerWG.Done()
	defer st.sc.handlers.Add(-1)
	var begin time.Time
	if len(srv.sh) > 0 {
		st.ctx = srv.sh.tagRPC(st.ctx, &stats.RPCTagInfo{FullMethodName: st.method})
		srv.sh.handleRPC(st.ctx, &stats.InHeader{FullMethod: st.method, RemoteAddr: st.sc.peer.Addr, LocalAddr: st.sc.peer.LocalAddr,
			Compression: st.recvCompress, WireLength: st.headerLen, Header: st.md})
		begin = time.Now()
		srv.sh.handleRPC(st.ctx, &stats.Begin{BeginTime: begin, IsClientStream: true, IsServerStream: true})
	}
	var err error
	if rc := st.recvCompress; rc != "" && rc != "identity" {
		err = status.Errorf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", rc)
	} else {
		err = srv.cfg.Handler(nil, st)
	}
	st.finish(err)
	if len(srv.sh) > 0 {
		end := &stats.End{BeginTime: begin, EndTime: time.Now()}
		if err != nil && err != io.EOF {
			end.Error = statusOf(err).Err()
		}
		srv.sh.handleRPC(st.ctx, end)
	}
}

// finish writes the trailers for the handler's result (a trailers-only response when nothing
// was sent), then RST_STREAM(NO_ERROR) when the client has not ended its side, and releases
// the stream.
func (st *ServerStream) finish(herr error) {
	defer st.cancel()
	st.s.rb.mu.Lock()
	st.s.rb.stopFirstTimerLocked()
	st.s.rb.mu.Unlock()
	stat := statusOf(herr)
	st.hmu.Lock()
	if st.done {
		st.hmu.Unlock()
		st.sc.streamDone(st)
		return
	}
	st.done = true
	var hdr []hpack.HeaderField
	trl := st.trlArr[:0]
	if !st.headerSent {
		st.headerSent = true
		if len(st.header) > 0 {
			hdr = st.headerFieldsLocked()
		} else {
			trl = append(trl, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: st.contentType})
		}
	}
	trl = appendStatusFields(trl, stat)
	if len(st.trailer) > 0 {
		if len(stat.Proto().GetDetails()) > 0 {
			delete(st.trailer, detailsHeader) // the status's own details win, as in grpc-go
		}
		trl = appendMetadata(trl, st.trailer)
	}
	st.hmu.Unlock()
	st.s.rb.mu.Lock()
	rst := !st.s.rb.eof
	st.s.rb.mu.Unlock()
	if !rst {
		st.sc.noteClosed(st.s.id) // both sides end the stream (before the client can see it)
	}
	err := st.sc.writeMsg(&st.s, &outFrames{hdr: hdr, trl: trl, rstAfter: rst, now: true}, nil)
	st.sc.streamDone(st)
	if err == nil && len(st.sc.srv.sh) > 0 {
		if hdr != nil {
			st.outHeaderStats()
		}
		st.sc.srv.sh.handleRPC(st.ctx, &stats.OutTrailer{Trailer: st.trailer.Copy()})
	}
}

// reset ends the stream because the client reset it (or sent a bad frame): the handler's
// context is cancelled and its reads and writes fail with err.
func (st *ServerStream) reset(err error) {
	_, left := st.sc.remove(&st.s)
	st.hmu.Lock()
	st.done = true
	st.hmu.Unlock()
	st.s.rb.abort(err)
	st.cancel()
	if left == 0 && st.sc.draining.Load() {
		go st.sc.finishDrain() // not on the reader goroutine: it takes the write lock
	}
}

// firstMessageLate ends the stream when its first request message has not arrived within
// ServerConfig.FirstMessageTimeout (the timer's function: it does nothing if the message,
// the end of the client's side or the end of the stream came first).
func (st *ServerStream) firstMessageLate() {
	r := &st.s.rb
	r.mu.Lock()
	late := r.firstTimer != nil
	r.firstTimer = nil
	r.mu.Unlock()
	if late {
		st.abandon(status.Errorf(codes.DeadlineExceeded, "h2grpc: no request message within %v of the call's headers", st.sc.srv.cfg.FirstMessageTimeout))
	}
}

// abandon ends a stream the server gives up on: the handler's reads and writes fail with
// err, its context is cancelled, and the client gets RST_STREAM(CANCEL).
func (st *ServerStream) abandon(err error) {
	st.reset(err)
	st.sc.queueRST(st.s.id, http2.ErrCodeCancel)
}

func (st *ServerStream) outHeaderStats() {
	if len(st.sc.srv.sh) > 0 {
		st.hmu.Lock()
		h := st.header.Copy()
		st.hmu.Unlock()
		st.sc.srv.sh.handleRPC(st.ctx, &stats.OutHeader{Header: h})
	}
}

// headerFieldsLocked returns the response HEADERS: :status, content-type, then metadata.
func (st *ServerStream) headerFieldsLocked() []hpack.HeaderField {
	if len(st.header) == 0 {
		switch st.contentType {
		case baseContentType:
			return hdrGRPC
		case baseContentType + "+proto":
			return hdrGRPCProto
		}
	}
	hf := make([]hpack.HeaderField, 0, 2+len(st.header))
	hf = append(hf, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: st.contentType})
	return appendMetadata(hf, st.header)
}

// Shared, never modified: the response headers of a call without header metadata.
var (
	hdrGRPC      = []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: baseContentType}}
	hdrGRPCProto = []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: baseContentType + "+proto"}}
)

// writeError turns a failed write into the status SendMsg returns.
func (st *ServerStream) writeError(err error) error {
	switch err {
	case errHeaderListTooLarge:
		return status.Error(codes.Internal, "header list size to send violates the maximum size set by the client")
	case errConnClosed:
		return status.Error(codes.Unavailable, "transport is closing")
	case errWriteStalled:
		err := status.Errorf(codes.DeadlineExceeded, "h2grpc: the client opened no flow-control window within %v; stream reset", st.sc.srv.cfg.WriteTimeout)
		st.abandon(err)
		return err
	}
	if ctxErr := st.ctx.Err(); ctxErr != nil {
		return status.FromContextError(ctxErr).Err()
	}
	return status.Error(codes.Canceled, "stream is done")
}

// transportStream is the grpc.ServerTransportStream view of a ServerStream, kept in its
// context (the two interfaces disagree on SetTrailer's result, so one type cannot be both).
type transportStream ServerStream

var _ grpc.ServerTransportStream = (*transportStream)(nil)

func (t *transportStream) Method() string                  { return t.method }
func (t *transportStream) SetHeader(md metadata.MD) error  { return (*ServerStream)(t).SetHeader(md) }
func (t *transportStream) SendHeader(md metadata.MD) error { return (*ServerStream)(t).SendHeader(md) }
func (t *transportStream) SetTrailer(md metadata.MD) error {
	if add, err := metadataToAdd(md); !add {
		return err
	}
	t.hmu.Lock()
	defer t.hmu.Unlock()
	if t.done {
		return errIllegalHeaderWrite
	}
	t.trailer = metadata.Join(t.trailer, md)
	return nil
}
