package h2grpc

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// maxStreamRetries bounds how often a call moves to another connection because the one it
// got could not take it before any of it was written (GOAWAY or a broken connection).
const maxStreamRetries = 3

// clientStream is one call on the client: Invoke's state, and the grpc.ClientStream of
// NewStream.
type clientStream struct {
	s       streamCore
	cc      *ClientConn
	ct      *clientTransport
	ctx     context.Context // the caller's, as tagged by the stats handlers
	desc    *grpc.StreamDesc
	method  string
	codec   encoding.CodecV2
	maxRecv int
	agent   string              // the user-agent header
	hdr     []hpack.HeaderField // the request headers, until written
	outMD   metadata.MD         // for stats.OutHeader
	begin   time.Time
	slot    bool // holds a MAX_CONCURRENT_STREAMS slot; under ct.mu

	headerAddr, trailerAddr *metadata.MD
	peerAddr                *peer.Peer

	// Written by the reader goroutine under s.rb.mu.
	gotHeader    bool
	trailersOnly bool
	header       metadata.MD
	trailer      metadata.MD
	st           *status.Status // from the trailers
	recvCompress string
	unprocessed  bool // refused or beyond GOAWAY: the server never processed it

	sentEnd        atomic.Bool // END_STREAM sent
	recvFirst      bool
	inHeaderStats  atomic.Bool
	inTrailerStats atomic.Bool
	finished       atomic.Bool
	stopCtx        func() bool
	bufs           [1]mem.Buffer
}

var _ grpc.ClientStream = (*clientStream)(nil)

func (cs *clientStream) core() *streamCore { return &cs.s }

// newClientStream applies the call options, tags the call for the stats handlers, builds the
// request headers and takes a stream slot on a connection. On error the call is finished.
func (cc *ClientConn) newClientStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts []grpc.CallOption) (*clientStream, error) {
	cs := &clientStream{cc: cc, ctx: ctx, desc: desc, method: method, codec: cc.codec, maxRecv: cc.cfg.MaxRecvMsgSize, agent: cc.agent}
	cs.s.owner = cs
	cs.s.rb.init()
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			cs.headerAddr = o.HeaderAddr
		case grpc.TrailerCallOption:
			cs.trailerAddr = o.TrailerAddr
		case grpc.PeerCallOption:
			cs.peerAddr = o.PeerAddr
		case grpc.ForceCodecV2CallOption:
			cs.codec = o.CodecV2
		case grpc.MaxRecvMsgSizeCallOption:
			cs.maxRecv = o.MaxRecvMsgSize
		case *UserAgentCallOption:
			cs.agent = o.header
		}
	}
	if len(cc.sh) > 0 {
		cs.ctx = cc.sh.tagRPC(ctx, &stats.RPCTagInfo{FullMethodName: method, FailFast: true})
		cs.begin = time.Now()
		cc.sh.handleRPC(cs.ctx, &stats.Begin{Client: true, BeginTime: cs.begin, FailFast: true,
			IsClientStream: desc.ClientStreams, IsServerStream: desc.ServerStreams})
	}
	err := cs.ctx.Err()
	if err != nil {
		err = status.FromContextError(err).Err()
	} else if err = cs.acquire(); err == nil {
		// After acquire: the grpc-timeout sent must not include the time to connect.
		cs.hdr, err = cs.requestHeaders()
	}
	if err != nil {
		cs.finish(err)
		return nil, err
	}
	return cs, nil
}

// acquire gets a connection and a stream slot on it.
func (cs *clientStream) acquire() error {
	for attempt := 0; ; attempt++ {
		ct, err := cs.cc.transport(cs.ctx)
		if err != nil {
			return err
		}
		switch err := ct.reserveSlot(cs, cs.ctx.Done()); err {
		case nil:
			cs.ct = ct
			cs.s.sendDone, cs.s.winInit = false, false
			return nil
		case errDone:
			return status.FromContextError(cs.ctx.Err()).Err()
		default:
			if attempt >= maxStreamRetries {
				return status.Error(codes.Unavailable, "no connection could take the stream")
			}
		}
	}
}

var contentTypeProto = contentType("proto")

// requestHeaders builds the HEADERS of the request, in grpc-go's order.
func (cs *clientStream) requestHeaders() ([]hpack.HeaderField, error) {
	md, hasMD := metadata.FromOutgoingContext(cs.ctx)
	ct := contentTypeProto
	if name := cs.codec.Name(); name != "proto" {
		ct = contentType(strings.ToLower(name))
	}
	hf := make([]hpack.HeaderField, 0, 8+md.Len())
	hf = append(hf,
		hpack.HeaderField{Name: ":method", Value: "POST"},
		hpack.HeaderField{Name: ":scheme", Value: cs.cc.scheme},
		hpack.HeaderField{Name: ":path", Value: cs.method},
		hpack.HeaderField{Name: ":authority", Value: cs.cc.cfg.Authority},
		hpack.HeaderField{Name: "content-type", Value: ct},
		hpack.HeaderField{Name: "user-agent", Value: cs.agent},
		hpack.HeaderField{Name: "te", Value: "trailers"})
	if dl, ok := cs.ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return nil, status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())
		}
		hf = append(hf, hpack.HeaderField{Name: "grpc-timeout", Value: encodeTimeout(d)})
	}
	if !printableASCII(cs.agent) {
		return nil, status.Error(codes.Internal, "the user-agent contains non-printable ASCII characters")
	}
	if hasMD {
		if err := validateMetadata(md); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		hf = appendMetadata(hf, md)
	}
	if len(cs.cc.sh) > 0 {
		if md == nil {
			md = metadata.MD{}
		}
		md.Set("user-agent", cs.agent)
		cs.outMD = md
	}
	return hf, nil
}

// writeFirst writes the frames that carry the request headers; when the connection could
// not take the stream before anything was written, the stream moves to another one.
func (cs *clientStream) writeFirst(o *outFrames) error {
	for attempt := 0; ; attempt++ {
		err := cs.ct.writeMsg(&cs.s, o, cs.ctx.Done())
		if err == nil || o.hdr == nil || attempt >= maxStreamRetries || (err != errRetry && err != errConnClosed) {
			if err == nil && len(cs.cc.sh) > 0 {
				cs.cc.sh.handleRPC(cs.ctx, &stats.OutHeader{Client: true, Header: cs.outMD, FullMethod: cs.method,
					RemoteAddr: cs.ct.peer.Addr, LocalAddr: cs.ct.peer.LocalAddr, Authority: cs.cc.cfg.Authority})
			}
			return err
		}
		cs.ct.release(cs)
		if err := cs.acquire(); err != nil {
			return err
		}
	}
}

// sendError turns a failed write into the call's error.
func (cs *clientStream) sendError(err error) error {
	switch err {
	case errDone:
		return status.FromContextError(cs.ctx.Err()).Err()
	case errHeaderListTooLarge:
		return status.Error(codes.Internal, "header list size to send violates the maximum size set by the server")
	case errConnClosed, errRetry:
		cs.s.rb.mu.Lock()
		e := cs.s.rb.err
		cs.s.rb.mu.Unlock()
		if e != nil {
			return e
		}
		return status.Error(codes.Unavailable, "transport is closing")
	}
	return err
}

func (cs *clientStream) marshal(m any) (mem.BufferSlice, []byte, error) {
	bs, err := cs.codec.Marshal(m)
	if err != nil {
		return nil, nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	return bs, payloadBytes(bs), nil
}

// sendUnary writes the request headers and message with END_STREAM, flushed once.
func (cs *clientStream) sendUnary(args any) error {
	bs, p, err := cs.marshal(args)
	if err != nil {
		return err
	}
	err = cs.writeFirst(&outFrames{hdr: cs.hdr, msg: p, hasMsg: true, endStream: true, now: true, ended: &cs.sentEnd})
	bs.Free()
	cs.hdr = nil
	switch err {
	case nil:
		cs.outPayloadStats(args, len(p))
		return nil
	case errStreamDone:
		return nil // the server ended the call already: its status is in the response
	}
	return cs.sendError(err)
}

// recvUnary reads the one response message and the trailers.
func (cs *clientStream) recvUnary(reply any) error {
	if err := cs.recvMsg(reply); err != nil {
		return err
	}
	return cs.recvEnd()
}

// start sends the headers of a streaming call, flushed soon (with the first message when it
// follows), and watches ctx so that cancelling it resets the stream.
func (cs *clientStream) start() error {
	err := cs.writeFirst(&outFrames{hdr: cs.hdr})
	cs.hdr = nil
	if err != nil && err != errStreamDone {
		return cs.sendError(err)
	}
	if cs.ctx.Done() != nil {
		cs.stopCtx = context.AfterFunc(cs.ctx, func() {
			e := status.FromContextError(cs.ctx.Err()).Err()
			cs.s.rb.abort(e)
			cs.finish(e)
		})
	}
	return nil
}

// SendMsg sends m. As in grpc-go, it returns io.EOF when the stream ended (the status comes
// from RecvMsg), and the error itself when the client caused it.
func (cs *clientStream) SendMsg(m any) error {
	if cs.sentEnd.Load() {
		return status.Error(codes.Internal, "SendMsg called after CloseSend")
	}
	bs, p, err := cs.marshal(m)
	if err != nil {
		return err
	}
	// Flushed at once: the server may need it to answer, and a RecvMsg already waiting on
	// another goroutine (a relay's other direction) would not flush it. Concurrent writers
	// still share a flush (frameWriter.unlock).
	err = cs.ct.writeMsg(&cs.s, &outFrames{msg: p, hasMsg: true, now: true}, cs.ctx.Done())
	bs.Free()
	switch err {
	case nil:
		cs.outPayloadStats(m, len(p))
		return nil
	case errDone:
		e := status.FromContextError(cs.ctx.Err()).Err()
		cs.s.rb.abort(e)
		cs.finish(e)
		return e
	case errHeaderListTooLarge:
		return cs.sendError(err)
	}
	return io.EOF
}

// CloseSend half-closes the stream (an empty DATA frame with END_STREAM, flushed at once). It
// returns nil, as grpc-go does: a failure shows in RecvMsg.
func (cs *clientStream) CloseSend() error {
	if cs.sentEnd.Swap(true) {
		return nil
	}
	_ = cs.ct.writeMsg(&cs.s, &outFrames{endStream: true, now: true}, cs.ctx.Done())
	return nil
}

// RecvMsg reads the next response message into m: io.EOF at the end of a successful stream,
// the call's status error otherwise. For a call without server streaming it also reads the
// trailers and returns their status.
func (cs *clientStream) RecvMsg(m any) error {
	err := cs.recvMsg(m)
	if err == nil && !cs.desc.ServerStreams {
		err = cs.recvEnd()
		cs.finish(err)
		return err
	}
	if err != nil {
		cs.finish(err)
	}
	return err
}

func (cs *clientStream) recvMsg(m any) error {
	msg, compressed, err := cs.ct.readMsg(&cs.s, cs.maxRecv, cs.ctx.Done())
	cs.headerStats()
	if err != nil {
		return cs.recvError(err)
	}
	if compressed {
		if rc := cs.compression(); rc != "" && rc != "identity" {
			return status.Errorf(codes.Internal, "grpc: Decompressor is not installed for grpc-encoding %q", rc)
		}
		return status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
	}
	cs.bufs[0] = mem.SliceBuffer(msg)
	err = cs.codec.Unmarshal(cs.bufs[:], m)
	cs.bufs[0] = nil
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	cs.recvFirst = true
	if len(cs.cc.sh) > 0 {
		cs.cc.sh.handleRPC(cs.ctx, &stats.InPayload{Client: true, RecvTime: time.Now(), Payload: m,
			Length: len(msg), CompressedLength: len(msg), WireLength: len(msg) + msgHeaderLen})
	}
	return nil
}

// recvEnd reads the end of a call whose one response message was read: the trailers' status.
func (cs *clientStream) recvEnd() error {
	_, _, err := cs.ct.readMsg(&cs.s, cs.maxRecv, cs.ctx.Done())
	if err == nil {
		return status.Error(codes.Internal, "cardinality violation: expected <EOF> for non server-streaming RPCs, but received another message")
	}
	if err = cs.recvError(err); err == io.EOF {
		return nil
	}
	return err
}

func (cs *clientStream) recvError(err error) error {
	switch err {
	case io.EOF:
		cs.s.rb.mu.Lock()
		st := cs.st
		cs.s.rb.mu.Unlock()
		cs.trailerStats()
		if st != nil && st.Code() != codes.OK {
			return st.Err()
		}
		if !cs.desc.ServerStreams && !cs.recvFirst {
			return status.Error(codes.Internal, "cardinality violation: received no response message from non-server-streaming RPC")
		}
		return io.EOF
	case io.ErrUnexpectedEOF:
		return status.Error(codes.Internal, io.ErrUnexpectedEOF.Error())
	case errDone:
		e := status.FromContextError(cs.ctx.Err()).Err()
		cs.s.rb.abort(e)
		return e
	}
	return err
}

func (cs *clientStream) compression() string {
	cs.s.rb.mu.Lock()
	defer cs.s.rb.mu.Unlock()
	return cs.recvCompress
}

// Header waits for the response headers. Like grpc-go, it returns nil, nil when the call
// ended without them (trailers-only, or an error RecvMsg reports).
func (cs *clientStream) Header() (metadata.MD, error) {
	r := &cs.s.rb
	flushed := false
	r.mu.Lock()
	for !cs.gotHeader && !r.eof && r.err == nil {
		if !flushed {
			r.mu.Unlock()
			cs.ct.w.flush()
			r.mu.Lock()
			flushed = true
			continue
		}
		if !r.waitLocked(cs.ctx.Done()) {
			r.mu.Unlock()
			e := status.FromContextError(cs.ctx.Err()).Err()
			r.abort(e)
			cs.finish(e)
			return nil, nil
		}
	}
	if cs.gotHeader && !cs.trailersOnly {
		md := cs.header.Copy()
		r.mu.Unlock()
		cs.headerStats()
		return md, nil
	}
	err := r.err
	if err == nil && cs.st != nil && cs.st.Code() != codes.OK {
		err = cs.st.Err()
	}
	r.mu.Unlock()
	cs.finish(err)
	return nil, nil
}

// Trailer returns the trailers, once RecvMsg returned an error (io.EOF included).
func (cs *clientStream) Trailer() metadata.MD {
	cs.s.rb.mu.Lock()
	defer cs.s.rb.mu.Unlock()
	return cs.trailer.Copy()
}

// Context returns the call's context.
func (cs *clientStream) Context() context.Context { return cs.ctx }

// finish ends the call once: it resets the stream if it is still open on the connection,
// fills the Header, Trailer and Peer call options, and reports stats.End.
func (cs *clientStream) finish(err error) {
	if !cs.finished.CompareAndSwap(false, true) {
		return
	}
	if cs.stopCtx != nil {
		cs.stopCtx()
	}
	if err == io.EOF {
		err = nil
	}
	written := false
	if ct := cs.ct; ct != nil {
		ct.mu.Lock()
		id := cs.s.id
		open := ct.releaseLocked(cs)
		ct.mu.Unlock()
		written = id != 0
		if open {
			ct.w.lock()
			if ct.w.err == nil {
				if e := ct.w.fr.WriteRSTStream(id, http2.ErrCodeCancel); e != nil {
					ct.w.failLocked(e)
				}
			}
			ct.w.unlock(true)
		}
	}
	cs.s.rb.mu.Lock()
	header, trailer, unprocessed, trailersOnly := cs.header, cs.trailer, cs.unprocessed, cs.trailersOnly
	cs.s.rb.mu.Unlock()
	if cs.headerAddr != nil && !trailersOnly {
		*cs.headerAddr = header
	}
	if cs.trailerAddr != nil {
		*cs.trailerAddr = trailer
	}
	// A stream whose first frames the connection never accepted (it failed first) cannot
	// have been seen by the server, like one it refused.
	delivered := written && cs.ct.w.accepted() >= cs.s.sentEnd.Load()
	if cs.peerAddr != nil && delivered && !unprocessed {
		*cs.peerAddr = cs.ct.peer
	}
	if len(cs.cc.sh) > 0 {
		cs.headerStats()
		cs.trailerStats()
		cs.cc.sh.handleRPC(cs.ctx, &stats.End{Client: true, BeginTime: cs.begin, EndTime: time.Now(), Trailer: trailer, Error: err})
	}
}
