package h2grpc

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	spb "google.golang.org/genproto/googleapis/rpc/status"
)

// encodeGrpcMessage percent-encodes msg for the grpc-message header as the gRPC HTTP/2 spec
// says: bytes outside printable ASCII and '%' become %XX; invalid UTF-8 becomes U+FFFD first.
func encodeGrpcMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < ' ' || c > '~' || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	const hex = "0123456789ABCDEF"
	var sb strings.Builder
	for _, r := range msg { // ranging a string turns invalid UTF-8 into U+FFFD
		if r >= ' ' && r <= '~' && r != '%' {
			sb.WriteByte(byte(r))
			continue
		}
		var buf [utf8.UTFMax]byte
		n := utf8.EncodeRune(buf[:], r)
		for _, b := range buf[:n] {
			sb.WriteByte('%')
			sb.WriteByte(hex[b>>4])
			sb.WriteByte(hex[b&0xf])
		}
	}
	return sb.String()
}

// decodeGrpcMessage undoes encodeGrpcMessage; a '%' not followed by two hex digits is kept.
func decodeGrpcMessage(msg string) string {
	if !strings.Contains(msg, "%") {
		return msg
	}
	var sb strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '%' && i+2 < len(msg) {
			if v, err := strconv.ParseUint(msg[i+1:i+3], 16, 8); err == nil {
				sb.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// statusOf turns a handler's error into the status sent to the client, the way grpc-go's
// server does: a status error keeps its status, a context error becomes Canceled or
// DeadlineExceeded, anything else Unknown with the error's text. nil is OK.
func statusOf(err error) *status.Status {
	if err == nil {
		return okStatus
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err)
	}
	return status.New(codes.Unknown, err.Error())
}

var okStatus = status.New(codes.OK, "")

// appendStatusFields appends grpc-status, grpc-message and, when the status has details,
// grpc-status-details-bin.
func appendStatusFields(hf []hpack.HeaderField, st *status.Status) []hpack.HeaderField {
	hf = append(hf,
		hpack.HeaderField{Name: "grpc-status", Value: codeString(st.Code())},
		hpack.HeaderField{Name: "grpc-message", Value: encodeGrpcMessage(st.Message())})
	if st.Code() == codes.OK {
		return hf // Proto() clones: skip it on the hot path
	}
	if p := st.Proto(); len(p.GetDetails()) > 0 {
		if b, err := proto.Marshal(p); err == nil {
			hf = append(hf, hpack.HeaderField{Name: detailsHeader, Value: encodeBinHeader(b)})
		}
	}
	return hf
}

const detailsHeader = "grpc-status-details-bin"

// codeStrings holds the decimal form of the 17 codes so trailers do not allocate.
var codeStrings = func() (s [17]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func codeString(c codes.Code) string {
	if int(c) < len(codeStrings) {
		return codeStrings[c]
	}
	return strconv.FormatUint(uint64(c), 10)
}

// statusFromTrailer builds the call's status from the grpc-status, grpc-message and
// grpc-status-details-bin values of a trailer. A details proto whose code differs from
// grpc-status is refused with Internal, like grpc-go.
func statusFromTrailer(code codes.Code, msg string, details []string) *status.Status {
	if code == codes.OK && msg == "" && len(details) == 0 {
		return okStatus
	}
	if len(details) != 1 {
		return status.New(code, msg)
	}
	p := &spb.Status{}
	if err := proto.Unmarshal([]byte(details[0]), p); err != nil {
		return status.New(code, msg)
	}
	if p.Code != int32(code) {
		return status.Newf(codes.Internal, "grpc-status-details-bin mismatch: grpc-status=%v, grpc-message=%q, grpc-status-details-bin=%+v", code, msg, p)
	}
	return status.FromProto(p)
}

// httpStatusCode maps a non-200 HTTP status of a response without grpc-status to a code, as
// the gRPC spec and grpc-go do.
func httpStatusCode(httpStatus int) codes.Code {
	switch httpStatus {
	case 400:
		return codes.Internal
	case 401:
		return codes.Unauthenticated
	case 403:
		return codes.PermissionDenied
	case 404:
		return codes.Unimplemented
	case 429, 502, 503, 504:
		return codes.Unavailable
	default:
		return codes.Unknown
	}
}

// rstStreamCode maps the error code of a RST_STREAM the server sent to the call's code, as
// grpc-go does (REFUSED_STREAM is handled before, as an unprocessed call).
func rstStreamCode(c http2.ErrCode) codes.Code {
	switch c {
	case http2.ErrCodeRefusedStream:
		return codes.Unavailable
	case http2.ErrCodeCancel:
		return codes.Canceled
	case http2.ErrCodeFlowControl, http2.ErrCodeEnhanceYourCalm:
		return codes.ResourceExhausted
	case http2.ErrCodeInadequateSecurity:
		return codes.PermissionDenied
	default:
		return codes.Internal
	}
}
