package h2grpc

import (
	"google.golang.org/grpc/encoding"

	// Registers the "proto" codec, the default when ClientConfig.Codec or ServerConfig.Codec
	// is nil.
	_ "google.golang.org/grpc/encoding/proto"
)

// codecOrProto is the codec a ClientConfig or ServerConfig names, or grpc's proto codec when
// it names none.
func codecOrProto(c encoding.CodecV2) encoding.CodecV2 {
	if c == nil {
		return encoding.GetCodecV2("proto")
	}
	return c
}
