package h2grpc

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// unprocessedEnd ends a stream the server never processed (REFUSED_STREAM, or beyond a
// GOAWAY's last stream id): Unavailable, and the Peer call option stays unset.
func (cs *clientStream) unprocessedEnd(err error) {
	r := &cs.s.rb
	r.mu.Lock()
	cs.unprocessed = true
	r.mu.Unlock()
	cs.ct.release(cs) // first: the caller woken by abort must find the stream closed
	r.abort(err)
}

// onHeaders (reader goroutine) takes the response headers or trailers, as grpc-go reads
// them: a response without a gRPC content-type is mapped from its HTTP status.
func (cs *clientStream) onHeaders(f *http2.MetaHeadersFrame) {
	end := f.StreamEnded()
	r := &cs.s.rb
	r.mu.Lock()
	initial := !cs.gotHeader
	if !initial && !end {
		r.mu.Unlock()
		cs.ct.resetStream(f.StreamID, http2.ErrCodeProtocol, status.Error(codes.Internal, "a HEADERS frame cannot appear in the middle of a stream"))
		return
	}
	var (
		isGRPC     = !initial
		ctErr      = "malformed header: missing HTTP content-type"
		httpStatus string
		code       = codes.Unknown
		hasStatus  bool
		msg        string
		mdb        mdBuilder
		fieldErr   *status.Status
	)
	for _, hf := range f.Fields {
		switch hf.Name {
		case "content-type":
			if _, ok := contentSubtype(hf.Value); !ok {
				ctErr = fmt.Sprintf("transport: received unexpected content-type %q", hf.Value)
				break
			}
			ctErr, isGRPC = "", true
			mdb.add(hf.Name, hf.Value, len(f.Fields))
		case "grpc-encoding":
			cs.recvCompress = hf.Value
		case "grpc-status":
			v, err := strconv.ParseUint(hf.Value, 10, 32)
			if err != nil {
				fieldErr = status.Newf(codes.Unknown, "transport: malformed grpc-status: %v", err)
			}
			code, hasStatus = codes.Code(v), true
		case "grpc-message":
			msg = decodeGrpcMessage(hf.Value)
		case ":status":
			httpStatus = hf.Value
		default:
			if isReservedHeader(hf.Name) && !isKeptReservedHeader(hf.Name) {
				break
			}
			v, err := decodeMetadataValue(hf.Name, hf.Value)
			if err != nil {
				fieldErr = status.Newf(codes.Internal, "transport: malformed %s: %v", hf.Name, err)
				break
			}
			mdb.add(hf.Name, v, len(f.Fields))
		}
	}
	if !isGRPC {
		st := status.New(codes.Internal, "malformed header: missing HTTP status")
		if httpStatus != "" {
			sc, err := strconv.Atoi(httpStatus)
			switch {
			case err != nil:
				st = status.Newf(codes.Internal, "transport: malformed http-status: %v", err)
			case sc >= 100 && sc < 200 && !end:
				r.mu.Unlock()
				return // informational
			default:
				m := fmt.Sprintf("unexpected HTTP status code received from server: %d (%s)", sc, http.StatusText(sc))
				if ctErr != "" {
					m += "; " + ctErr
				}
				st = status.New(httpStatusCode(sc), m)
			}
		}
		fieldErr = st
	}
	md := mdb.md
	if fieldErr != nil {
		r.mu.Unlock()
		code := http2.ErrCodeProtocol
		if end {
			code = http2.ErrCodeNo
		}
		cs.ct.resetStream(f.StreamID, code, fieldErr.Err())
		return
	}
	if !end {
		cs.header, cs.gotHeader = md, true
		r.signalLocked()
		r.mu.Unlock()
		return
	}
	if initial {
		cs.gotHeader, cs.trailersOnly = true, true
	}
	if hasStatus {
		cs.st = statusFromTrailer(code, msg, md[detailsHeader])
	} else {
		cs.st = status.New(codes.Internal, "server sent trailers without grpc-status")
	}
	cs.trailer = md
	r.mu.Unlock()
	// Out of the table before the caller wakes: a finish that finds its stream still there
	// takes it for one the server has not ended and resets it.
	cs.ct.release(cs)
	r.mu.Lock()
	r.eof = true
	r.signalLocked()
	r.mu.Unlock()
	if !cs.sentEnd.Load() {
		cs.ct.queueRST(f.StreamID, http2.ErrCodeNo)
	}
}

func (cs *clientStream) outPayloadStats(m any, n int) {
	if len(cs.cc.sh) > 0 {
		cs.cc.sh.handleRPC(cs.ctx, &stats.OutPayload{Client: true, Payload: m, Length: n, CompressedLength: n,
			WireLength: n + msgHeaderLen, SentTime: time.Now()})
	}
}

// headerStats reports stats.InHeader once the headers arrived (once).
func (cs *clientStream) headerStats() {
	if len(cs.cc.sh) == 0 || cs.inHeaderStats.Load() {
		return
	}
	cs.s.rb.mu.Lock()
	got, only, h, comp := cs.gotHeader, cs.trailersOnly, cs.header, cs.recvCompress
	cs.s.rb.mu.Unlock()
	if got && !only && cs.inHeaderStats.CompareAndSwap(false, true) {
		cs.cc.sh.handleRPC(cs.ctx, &stats.InHeader{Client: true, Header: h.Copy(), Compression: comp,
			FullMethod: cs.method, RemoteAddr: cs.ct.peer.Addr, LocalAddr: cs.ct.peer.LocalAddr})
	}
}

// trailerStats reports stats.InTrailer once the trailers arrived (once).
func (cs *clientStream) trailerStats() {
	if len(cs.cc.sh) == 0 || cs.inTrailerStats.Load() {
		return
	}
	cs.s.rb.mu.Lock()
	got, t := cs.st != nil, cs.trailer
	cs.s.rb.mu.Unlock()
	if got && cs.inTrailerStats.CompareAndSwap(false, true) {
		cs.cc.sh.handleRPC(cs.ctx, &stats.InTrailer{Client: true, Trailer: t.Copy()})
	}
}
