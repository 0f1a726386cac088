package h2grpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	spb "google.golang.org/genproto/googleapis/rpc/status"
)

func TestGrpcMessageEncoding(t *testing.T) {
	cases := []struct{ in, enc string }{
		{"", ""},
		{"plain text ~", "plain text ~"},
		{"100%", "100%25"},
		{"héllo", "h%C3%A9llo"},
		{"a\nb\x00", "a%0Ab%00"},
		{"✓", "%E2%9C%93"},
		{"bad \xff utf8", "bad %EF%BF%BD utf8"},
	}
	for _, c := range cases {
		if got := encodeGrpcMessage(c.in); got != c.enc {
			t.Errorf("encode(%q) = %q, want %q", c.in, got, c.enc)
		}
		want := c.in
		if c.in == "bad \xff utf8" {
			want = "bad \uFFFD utf8"
		}
		if got := decodeGrpcMessage(c.enc); got != want {
			t.Errorf("decode(%q) = %q, want %q", c.enc, got, want)
		}
	}
	if got := decodeGrpcMessage("50%zz%4"); got != "50%zz%4" {
		t.Errorf("malformed escapes: %q", got)
	}
}

func TestStatusOf(t *testing.T) {
	cases := []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{nil, codes.OK, ""},
		{status.Error(codes.NotFound, "nope"), codes.NotFound, "nope"},
		{fmt.Errorf("wrapped: %w", status.Error(codes.Aborted, "x")), codes.Aborted, "wrapped: rpc error: code = Aborted desc = x"},
		{context.Canceled, codes.Canceled, "context canceled"},
		{context.DeadlineExceeded, codes.DeadlineExceeded, "context deadline exceeded"},
		{errors.New("boom"), codes.Unknown, "boom"},
	}
	for _, c := range cases {
		st := statusOf(c.err)
		if st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("statusOf(%v) = %v %q, want %v %q", c.err, st.Code(), st.Message(), c.code, c.msg)
		}
	}
}

func TestStatusFields(t *testing.T) {
	st, _ := status.New(codes.Unavailable, "down 100%").WithDetails(&spb.Status{Code: 1})
	hf := appendStatusFields(nil, st)
	if len(hf) != 3 || hf[0] != (hpack.HeaderField{Name: "grpc-status", Value: "14"}) ||
		hf[1] != (hpack.HeaderField{Name: "grpc-message", Value: "down 100%25"}) || hf[2].Name != detailsHeader {
		t.Fatalf("fields %v", hf)
	}
	raw, err := decodeBinHeader(hf[2].Value)
	if err != nil {
		t.Fatal(err)
	}
	back := statusFromTrailer(codes.Unavailable, "down 100%", []string{string(raw)})
	if !proto.Equal(back.Proto(), st.Proto()) {
		t.Errorf("round trip %v, want %v", back.Proto(), st.Proto())
	}
	if got := statusFromTrailer(codes.Internal, "m", []string{string(raw)}); got.Code() != codes.Internal || !contains(got.Message(), "mismatch") {
		t.Errorf("mismatch: %v", got)
	}
	if got := statusFromTrailer(codes.NotFound, "m", []string{"\xff garbage"}); got.Code() != codes.NotFound || got.Message() != "m" {
		t.Errorf("garbage details: %v", got)
	}
}

func TestHTTPAndRSTCodes(t *testing.T) {
	httpCases := map[int]codes.Code{400: codes.Internal, 401: codes.Unauthenticated, 403: codes.PermissionDenied,
		404: codes.Unimplemented, 429: codes.Unavailable, 502: codes.Unavailable, 503: codes.Unavailable,
		504: codes.Unavailable, 500: codes.Unknown, 415: codes.Unknown}
	for h, want := range httpCases {
		if got := httpStatusCode(h); got != want {
			t.Errorf("HTTP %d → %v, want %v", h, got, want)
		}
	}
	rstCases := map[http2.ErrCode]codes.Code{http2.ErrCodeCancel: codes.Canceled, http2.ErrCodeRefusedStream: codes.Unavailable,
		http2.ErrCodeFlowControl: codes.ResourceExhausted, http2.ErrCodeProtocol: codes.Internal, http2.ErrCodeNo: codes.Internal}
	for c, want := range rstCases {
		if got := rstStreamCode(c); got != want {
			t.Errorf("RST %v → %v, want %v", c, got, want)
		}
	}
}
