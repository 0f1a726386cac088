// Package rawcodec is the gRPC codec of the gateway's server and of its gRPC backend client:
// messages cross the gateway as the bytes they were on the wire, never re-encoded.
package rawcodec

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Frame is one gRPC message as protobuf wire bytes, sent and received without re-encoding.
type Frame struct {
	Payload []byte
}

// EachFrame receives frames from s (a grpc.ServerStream or grpc.ClientStream) until the
// stream ends, and gives each to fn. It returns nil at the end (io.EOF), else the first error
// of either.
func EachFrame(s interface{ RecvMsg(any) error }, fn func(*Frame) error) error {
	for {
		f := new(Frame)
		if err := s.RecvMsg(f); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
	}
}

// Codec marshals a *Frame as its Payload, byte for byte, and unmarshals a message into a
// *Frame by copying it. A *emptypb.Empty is treated the same way through its unknown fields:
// it is how github.com/mwitkow/grpc-proxy relays a stream's messages, and the bytes are kept
// unparsed (a parse would only find unknown fields, and give back the same bytes). Any other
// type goes to grpc's proto codec, so one codec serves raw frames and typed messages alike.
// It is safe for concurrent use.
//
// Name is "proto" on purpose: a forced codec's name becomes the call's content-subtype, and the
// driver must see "application/grpc+proto" — the bytes are protobuf, and a driver (in any
// language) that does not know some other subtype would refuse the call.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// protoCodec is grpc's registered proto codec; it is set once when the package loads.
var protoCodec = encoding.GetCodecV2(protoenc.Name)

// Marshal returns the bytes of a *Frame or a *emptypb.Empty as they are (not copied: the
// caller must not change them until the call is done; Unmarshal never writes into bytes it
// handed out before), and the proto encoding of anything else.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	var b []byte
	switch m := v.(type) {
	case *Frame:
		if m == nil {
			return nil, fmt.Errorf("raw codec: cannot marshal a nil *Frame")
		}
		b = m.Payload
	case *emptypb.Empty:
		if m == nil {
			return protoCodec.Marshal(v)
		}
		b = m.ProtoReflect().GetUnknown()
	default:
		return protoCodec.Marshal(v)
	}
	if len(b) == 0 {
		return nil, nil
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// Unmarshal copies data into a *Frame's Payload (an empty message gives a nil Payload) or a
// *emptypb.Empty's unknown fields, and decodes data into anything else with the proto codec.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *Frame:
		if m == nil {
			return fmt.Errorf("raw codec: cannot unmarshal into a nil *Frame")
		}
		// Materialize copies: grpc reuses data's buffers once Unmarshal returns.
		m.Payload = data.Materialize()
		return nil
	case *emptypb.Empty:
		if m == nil {
			return protoCodec.Unmarshal(data, v)
		}
		// A fresh copy, never an append: bytes Marshal handed out stay as they were.
		m.ProtoReflect().SetUnknown(data.Materialize())
		return nil
	}
	return protoCodec.Unmarshal(data, v)
}

// Name returns "proto"; see the type's comment for why.
func (Codec) Name() string { return protoenc.Name }
