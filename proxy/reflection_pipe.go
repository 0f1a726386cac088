package proxy

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

// pipeStream is a grpc.ServerStream held by the gateway itself: a stream handler (the local
// reflection service, or a backend's Stream relaying to a driver) reads the messages put in
// in and writes its messages to out, as wire bytes. It takes the three forms messages cross
// the gateway in — raw frames, grpc-proxy's *emptypb.Empty, typed messages — so either kind
// of handler can serve it. Headers and trailers are dropped: reflection has none that matter.
type pipeStream struct {
	ctx context.Context
	in  chan []byte // closed: the handler's next RecvMsg is io.EOF
	out chan []byte
}

func newPipeStream(ctx context.Context) *pipeStream {
	return &pipeStream{ctx: ctx, in: make(chan []byte), out: make(chan []byte)}
}

func (p *pipeStream) Context() context.Context     { return p.ctx }
func (p *pipeStream) SetHeader(metadata.MD) error  { return nil }
func (p *pipeStream) SendHeader(metadata.MD) error { return nil }
func (p *pipeStream) SetTrailer(metadata.MD)       {}

func (p *pipeStream) RecvMsg(m any) error {
	select {
	case b, ok := <-p.in:
		if !ok {
			return io.EOF
		}
		return setWireBytes(m, b)
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

func (p *pipeStream) SendMsg(m any) error {
	b, err := wireBytes(m)
	if err != nil {
		return err
	}
	select {
	case p.out <- b:
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

// wireBytes returns a message's protobuf wire bytes, whichever form it crosses in.
func wireBytes(m any) ([]byte, error) {
	switch v := m.(type) {
	case *rawcodec.Frame:
		return v.Payload, nil
	case *emptypb.Empty:
		return v.ProtoReflect().GetUnknown(), nil
	case proto.Message:
		return proto.Marshal(v)
	}
	return nil, fmt.Errorf("pipe stream: cannot send a %T", m)
}

// setWireBytes fills m, in whichever form it is, with wire bytes b.
func setWireBytes(m any, b []byte) error {
	switch v := m.(type) {
	case *rawcodec.Frame:
		v.Payload = b
		return nil
	case *emptypb.Empty:
		v.ProtoReflect().SetUnknown(b)
		return nil
	case proto.Message:
		return proto.Unmarshal(b, v)
	}
	return fmt.Errorf("pipe stream: cannot receive into a %T", m)
}
