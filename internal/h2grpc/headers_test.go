package h2grpc

import (
	"reflect"
	"testing"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"
)

func TestContentSubtype(t *testing.T) {
	cases := []struct {
		ct, sub string
		ok      bool
	}{
		{"application/grpc", "", true},
		{"application/grpc+proto", "proto", true},
		{"application/grpc;charset=utf-8", "charset=utf-8", true},
		{"application/grpcx", "", false},
		{"application/json", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		sub, ok := contentSubtype(c.ct)
		if sub != c.sub || ok != c.ok {
			t.Errorf("contentSubtype(%q) = %q, %v", c.ct, sub, ok)
		}
	}
}

func TestAppendMetadata(t *testing.T) {
	md := metadata.MD{"k": {"a", "b"}, "x-bin": {"\x00\xff"}, ":path": {"/evil"}, "te": {"x"}, "Upper": {"v"}}
	got := map[string][]string{}
	for _, f := range appendMetadata(nil, md) {
		got[f.Name] = append(got[f.Name], f.Value)
	}
	want := map[string][]string{"k": {"a", "b"}, "x-bin": {"AP8"}, "upper": {"v"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if !equalStrings(got[k], v) {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, enc := range []string{"AP8", "AP8="} {
		if v, err := decodeMetadataValue("x-bin", enc); err != nil || v != "\x00\xff" {
			t.Errorf("decode %q = %q, %v", enc, v, err)
		}
	}
	if _, err := decodeMetadataValue("x-bin", "!!"); err == nil {
		t.Error("bad base64 accepted")
	}
}

func TestValidateMetadata(t *testing.T) {
	cases := []struct {
		md metadata.MD
		ok bool
	}{
		{metadata.Pairs("a-b_c.d", "printable ~"), true},
		{metadata.Pairs("x-bin", "\x00\x01"), true},
		{metadata.MD{"bad key": {"v"}}, false},
		{metadata.Pairs("k", "line\nbreak"), false},
		{metadata.MD{"": {"v"}}, false},
	}
	for _, c := range cases {
		if err := validateMetadata(c.md); (err == nil) != c.ok {
			t.Errorf("validate(%v) = %v", c.md, err)
		}
	}
}

func TestReservedHeaders(t *testing.T) {
	for _, h := range []string{":path", ":authority", "content-type", "user-agent", "te", "grpc-timeout", "grpc-status", "grpc-message", "grpc-encoding"} {
		if !isReservedHeader(h) {
			t.Errorf("%s not reserved", h)
		}
	}
	for _, h := range []string{"authorization", "grpc-accept-encoding", "x-custom", "grpc-status-details-bin"} {
		if isReservedHeader(h) {
			t.Errorf("%s reserved", h)
		}
	}
	if headerListSize([]hpack.HeaderField{{Name: "ab", Value: "cde"}}) != 37 {
		t.Error("headerListSize")
	}
}

// TestMDBuilder: values of different keys share one array, yet appending to a key (a repeated
// key, or the caller's own append later) never changes another key's values.
func TestMDBuilder(t *testing.T) {
	var b mdBuilder
	b.add("a", "1", 4)
	b.add("b", "2", 4)
	b.add("a", "3", 4)
	b.add("c", "4", 4)
	want := metadata.MD{"a": {"1", "3"}, "b": {"2"}, "c": {"4"}}
	if !reflect.DeepEqual(b.md, want) {
		t.Fatalf("md = %v, want %v", b.md, want)
	}
	b.md["b"] = append(b.md["b"], "x")
	if got := b.md["c"]; len(got) != 1 || got[0] != "4" {
		t.Fatalf("appending to b changed c: %v", got)
	}
	var empty mdBuilder
	if empty.md != nil {
		t.Fatal("an mdBuilder with nothing added has metadata")
	}
}
