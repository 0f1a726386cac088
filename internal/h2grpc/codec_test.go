package h2grpc

import (
	"testing"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// namedCodec is a codec that only has a name: codecOrProto never marshals.
type namedCodec string

func (namedCodec) Marshal(any) (mem.BufferSlice, error) { return nil, nil }
func (namedCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (c namedCodec) Name() string                       { return string(c) }

func TestCodecOrProto(t *testing.T) {
	if got := codecOrProto(nil); got != encoding.GetCodecV2("proto") {
		t.Errorf("codecOrProto(nil) is %q, want grpc's proto codec", got.Name())
	}
	if got := codecOrProto(namedCodec("own")); got != namedCodec("own") {
		t.Errorf("codecOrProto(own) is %q, want the codec given", got.Name())
	}
}
