package grpc

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

func TestCodecDelegatesOtherTypes(t *testing.T) {
	msg := &csi.ProbeRequest{}
	raw, _ := proto.Marshal(&csi.CreateVolumeRequest{Name: "x"})

	// An emptypb.Empty keeps what it does not know as unknown fields and writes them back as
	// they came: this is how grpc-proxy relays stream frames.
	var e emptypb.Empty
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &e); err != nil {
		t.Fatal(err)
	}
	out, err := Codec{}.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Materialize(), raw) {
		t.Fatalf("emptypb round trip %x, want %x", out.Materialize(), raw)
	}
	if _, err := (Codec{}).Marshal(msg); err != nil {
		t.Fatal(err)
	}
	if _, err := (Codec{}).Marshal("not a message"); err == nil {
		t.Fatal("marshaled a string")
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
