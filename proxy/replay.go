package proxy

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"

	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

// replayStream is the caller's stream of a server-streaming call whose one request the
// gateway has already read (to decode, log and scrub it like a unary request): its first
// RecvMsg hands that request out again, and later ones go to the caller's stream, which
// then reports the caller's end of sending.
type replayStream struct {
	grpc.ServerStream
	first []byte // nil once handed out
}

func (s *replayStream) RecvMsg(m any) error {
	if s.first == nil {
		return s.ServerStream.RecvMsg(m)
	}
	b := s.first
	s.first = nil
	if f, ok := m.(*rawcodec.Frame); ok {
		f.Payload = b
		return nil
	}
	// grpc-proxy receives into *emptypb.Empty, which the codec fills with the bytes as they are.
	return rawcodec.Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m)
}
