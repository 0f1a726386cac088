package rawcodec

import (
	"bytes"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

func TestCodecFrames(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"bytes", []byte{0x0a, 0x03, 'a', 'b', 'c'}},
		{"not protobuf at all", []byte{0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Codec{}.Marshal(&Frame{Payload: tt.payload})
			if err != nil {
				t.Fatal(err)
			}
			if got := data.Materialize(); !bytes.Equal(got, tt.payload) {
				t.Fatalf("marshaled %x, want %x", got, tt.payload)
			}
			// Unmarshal must copy: grpc frees and reuses the buffers afterwards.
			buf := append([]byte(nil), tt.payload...)
			var f Frame
			if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(buf)}, &f); err != nil {
				t.Fatal(err)
			}
			for i := range buf {
				buf[i] = 0
			}
			if !bytes.Equal(f.Payload, tt.payload) {
				t.Fatalf("unmarshaled %x, want %x", f.Payload, tt.payload)
			}
		})
	}
}

// TestCodecEmptyRelaysBytes: an emptypb.Empty carries a message's bytes in its unknown fields
// as they came, protobuf or not (grpc-proxy relays stream messages this way), and receiving the
// next message into the same Empty leaves the bytes already handed out untouched.
func TestCodecEmptyRelaysBytes(t *testing.T) {
	raw, _ := proto.Marshal(&csi.CreateVolumeRequest{Name: "x", Parameters: map[string]string{"a": "b"}})
	var e emptypb.Empty
	for _, in := range [][]byte{raw, {0xff, 0xff, 0xff}, nil} {
		if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(append([]byte(nil), in...))}, &e); err != nil {
			t.Fatal(err)
		}
		out, err := Codec{}.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Materialize(), in) {
			t.Fatalf("emptypb round trip %x, want %x", out.Materialize(), in)
		}
	}
	// What proto.Unmarshal would have made of valid bytes: the same unknown fields.
	var parsed emptypb.Empty
	if err := proto.Unmarshal(raw, &parsed); err != nil {
		t.Fatal(err)
	}
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &e); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&parsed, &e) {
		t.Fatal("the relayed Empty differs from a parsed one")
	}
	sent, _ := Codec{}.Marshal(&e)
	next, _ := proto.Marshal(&csi.DeleteVolumeRequest{VolumeId: "y"})
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(next)}, &e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sent.Materialize(), raw) {
		t.Fatal("receiving the next message changed the bytes of the one sent before")
	}
}

func TestCodecDelegatesOtherTypes(t *testing.T) {
	if _, err := (Codec{}).Marshal(&csi.ProbeRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := (Codec{}).Marshal("not a message"); err == nil {
		t.Fatal("marshaled a string")
	}
	raw, _ := proto.Marshal(&csi.CreateVolumeRequest{Name: "x"})
	var req csi.CreateVolumeRequest
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &req); err != nil || req.GetName() != "x" {
		t.Fatalf("decoded %v (%v), want the name x", &req, err)
	}
}

func TestCodecNilFrame(t *testing.T) {
	if _, err := (Codec{}).Marshal((*Frame)(nil)); err == nil {
		t.Error("Marshal(nil *Frame) succeeded")
	}
	if err := (Codec{}).Unmarshal(nil, (*Frame)(nil)); err == nil {
		t.Error("Unmarshal into nil *Frame succeeded")
	}
}

func TestCodecName(t *testing.T) {
	if got := (Codec{}).Name(); got != "proto" {
		t.Fatalf("Name %q, want proto (the driver sees it as the content-subtype)", got)
	}
}
