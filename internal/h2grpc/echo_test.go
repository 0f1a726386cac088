package h2grpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	spb "google.golang.org/genproto/googleapis/rpc/status"
)

// Methods of echoHandler.
const (
	mUnary        = "/test.Echo/Unary"
	mStatus       = "/test.Echo/Status"
	mServerStream = "/test.Echo/ServerStream"
	mClientStream = "/test.Echo/ClientStream"
	mBidi         = "/test.Echo/Bidi"
	mDeadline     = "/test.Echo/Deadline"
	mBlock        = "/test.Echo/Block"
)

// echoService is echoHandler with a channel where Block reports how its context ended.
type echoService struct{ blocked chan error }

// handle serves Deadline (answers its context's deadline, UnixNano in 8 bytes) and Block
// (waits for its context to end, reports ctx.Err() on blocked, returns it), and the rest
// through echoHandler.
func (e *echoService) handle(srv any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	ctx := ss.Context()
	switch method {
	case mDeadline:
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		dl, ok := ctx.Deadline()
		if !ok {
			return status.Error(9, "no deadline")
		}
		return ss.SendMsg(&frame{b: binary.BigEndian.AppendUint64(nil, uint64(dl.UnixNano()))})
	case mBlock:
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		if err := ss.SendHeader(metadata.Pairs("x-started", "1")); err != nil {
			return err
		}
		<-ctx.Done()
		if e.blocked != nil {
			e.blocked <- ctx.Err()
		}
		return ctx.Err()
	}
	return echoHandler(srv, ss)
}

// echoHandler is the tests' service, written only against grpc's public API so it behaves
// the same behind grpc.Server and h2grpc.Server:
//   - Unary echoes the message; every incoming "x-" key comes back as a header, and as a
//     trailer prefixed "t-" (set through grpc.SetHeader/SetTrailer on the context).
//   - Status returns the google.rpc.Status the request holds (proto bytes) as the error.
//   - ServerStream sends the request back b[0] times.
//   - ClientStream answers with the concatenation of the requests.
//   - Bidi echoes each message until the client ends.
func echoHandler(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	ctx := ss.Context()
	switch method {
	case mUnary:
		md, _ := metadata.FromIncomingContext(ctx)
		hdr, trl := metadata.MD{}, metadata.MD{}
		for k, v := range md {
			if strings.HasPrefix(k, "x-") {
				hdr[k] = v
				trl["t-"+k] = v
			}
		}
		if err := grpc.SetHeader(ctx, hdr); err != nil {
			return err
		}
		if err := grpc.SetTrailer(ctx, trl); err != nil {
			return err
		}
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		return ss.SendMsg(&f)
	case mStatus:
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		p := &spb.Status{}
		if err := proto.Unmarshal(f.b, p); err != nil {
			return err
		}
		return status.FromProto(p).Err()
	case mServerStream:
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		for range int(f.b[0]) {
			if err := ss.SendMsg(&f); err != nil {
				return err
			}
		}
		return nil
	case mClientStream:
		var all bytes.Buffer
		for {
			var f frame
			err := ss.RecvMsg(&f)
			if errors.Is(err, io.EOF) {
				return ss.SendMsg(&frame{b: all.Bytes()})
			}
			if err != nil {
				return err
			}
			all.Write(f.b)
		}
	case mBidi:
		for {
			var f frame
			err := ss.RecvMsg(&f)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := ss.SendMsg(&f); err != nil {
				return err
			}
		}
	}
	return status.Errorf(12, "unknown method %s", method)
}
