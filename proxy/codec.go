package proxy

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	// Registers the "proto" codec that rawCodec delegates to.
	_ "google.golang.org/grpc/encoding/proto"
)

// frame is one message as it travels on the wire: the gateway reads and writes request and
// response frames without decoding them, so what a caller sends is what a backend receives.
type frame struct{ payload []byte }

// rawCodec is the gateway server's codec. Frames pass through as bytes; any other message
// (such as the *emptypb.Empty that grpc-proxy's stream forwarder uses) goes to the standard
// proto codec.
type rawCodec struct{}

var protoCodec = encoding.GetCodecV2("proto")

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.payload)}, nil
	}
	return protoCodec.Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*frame); ok {
		f.payload = data.Materialize()
		return nil
	}
	return protoCodec.Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }
