package grpc

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Frame is one gRPC message as protobuf wire bytes, sent and received without re-encoding.
type Frame struct {
	Payload []byte
}

// Codec is the raw codec of the unary fast path: it marshals a *Frame as its Payload, byte for
// byte, and unmarshals a message into a *Frame by copying it. Any other type is handed to
// grpc's proto codec, so a stream that carries both raw frames and typed messages (such as the
// *emptypb.Empty that github.com/mwitkow/grpc-proxy relays, whose unknown fields hold the raw
// bytes) works with one codec. It is safe for concurrent use.
//
// Name is "proto" on purpose: a forced codec's name becomes the call's content-subtype, and the
// driver must see "application/grpc+proto" — the bytes are protobuf, and a driver (in any
// language) that does not know some other subtype would refuse the call.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// protoCodec is grpc's registered proto codec; it is set once when the package loads.
var protoCodec = encoding.GetCodecV2(protoenc.Name)

// Marshal returns f.Payload as is when v is a *Frame (the slice is not copied: the caller must
// not change it until the call is done), and the proto encoding of v otherwise.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*Frame)
	if !ok {
		return protoCodec.Marshal(v)
	}
	if f == nil {
		return nil, fmt.Errorf("raw codec: cannot marshal a nil *Frame")
	}
	if len(f.Payload) == 0 {
		return nil, nil
	}
	return mem.BufferSlice{mem.SliceBuffer(f.Payload)}, nil
}

// Unmarshal copies data into v.Payload when v is a *Frame (an empty message gives a nil
// Payload), and decodes data into v with the proto codec otherwise.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*Frame)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	if f == nil {
		return fmt.Errorf("raw codec: cannot unmarshal into a nil *Frame")
	}
	// Materialize copies: grpc reuses data's buffers once Unmarshal returns.
	f.Payload = data.Materialize()
	return nil
}

// Name returns "proto"; see the type's comment for why.
func (Codec) Name() string { return protoenc.Name }
