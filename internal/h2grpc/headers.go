package h2grpc

import (
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	baseContentType = "application/grpc"
	binSuffix       = "-bin"
)

// isReservedHeader reports whether a header belongs to the transport rather than to the
// call's metadata (the same list as grpc-go: pseudo-headers, content-type, user-agent, te and
// the grpc-* fields the transport itself reads).
func isReservedHeader(name string) bool {
	if name != "" && name[0] == ':' {
		return true
	}
	switch name {
	case "content-type", "user-agent", "grpc-message-type", "grpc-encoding", "grpc-message",
		"grpc-status", "grpc-timeout", "te":
		return true
	}
	return false
}

// isKeptReservedHeader reports whether a reserved header still reaches the handler's incoming
// metadata, as in grpc-go (":authority" and "user-agent").
func isKeptReservedHeader(name string) bool {
	return name == ":authority" || name == "user-agent"
}

// contentSubtype parses a gRPC content-type: "application/grpc" gives "", and
// "application/grpc+proto" or "application/grpc;…" give what follows. ok is false for any
// other content-type.
func contentSubtype(ct string) (sub string, ok bool) {
	if ct == baseContentType {
		return "", true
	}
	if !strings.HasPrefix(ct, baseContentType) {
		return "", false
	}
	switch ct[len(baseContentType)] {
	case '+', ';':
		return ct[len(baseContentType)+1:], true
	}
	return "", false
}

// contentType is the inverse of contentSubtype.
func contentType(sub string) string {
	if sub == "" {
		return baseContentType
	}
	return baseContentType + "+" + sub
}

func encodeBinHeader(v []byte) string { return base64.RawStdEncoding.EncodeToString(v) }

// decodeBinHeader accepts padded and unpadded base64, as the gRPC spec asks of receivers.
func decodeBinHeader(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// decodeMetadataValue returns a header's metadata value: base64-decoded for "-bin" keys.
func decodeMetadataValue(name, v string) (string, error) {
	if strings.HasSuffix(name, binSuffix) {
		b, err := decodeBinHeader(v)
		return string(b), err
	}
	return v, nil
}

// appendMetadata appends md as header fields, skipping reserved keys (a peer would refuse
// them after regular fields) and base64-encoding "-bin" values. Keys are lower-cased as HTTP/2
// requires.
func appendMetadata(hf []hpack.HeaderField, md metadata.MD) []hpack.HeaderField {
	for k, vv := range md {
		k = lowerKey(k)
		if isReservedHeader(k) {
			continue
		}
		bin := strings.HasSuffix(k, binSuffix)
		for _, v := range vv {
			if bin {
				v = encodeBinHeader([]byte(v))
			}
			hf = append(hf, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return hf
}

func lowerKey(k string) string {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(k)
		}
	}
	return k
}

// metadataToAdd says whether a handler's md has entries to add to its headers or trailers,
// and fails (INTERNAL) when one cannot be sent (validateMetadata).
func metadataToAdd(md metadata.MD) (bool, error) {
	if md.Len() == 0 {
		return false, nil
	}
	if err := validateMetadata(md); err != nil {
		return false, status.Error(codes.Internal, err.Error())
	}
	return true, nil
}

// validateMetadata checks outgoing metadata the way grpc-go's client does: keys of
// [0-9a-z-_.] and, unless the key ends in "-bin", values of printable ASCII.
func validateMetadata(md metadata.MD) error {
	for k, vv := range md {
		k = lowerKey(k)
		if k == "" {
			return fmt.Errorf("there is an empty key in the header")
		}
		if k[0] == ':' {
			continue // reserved pseudo-headers are dropped, not refused
		}
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
				return fmt.Errorf("header key %q contains illegal characters not in [0-9a-z-_.]", k)
			}
		}
		if strings.HasSuffix(k, binSuffix) {
			continue
		}
		for _, v := range vv {
			if !printableASCII(v) {
				return fmt.Errorf("header key %q contains value with non-printable ASCII characters", k)
			}
		}
	}
	return nil
}

// printableASCII reports whether v is made of printable ASCII only, as the value of a header
// that is not "-bin" must be.
func printableASCII(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7E {
			return false
		}
	}
	return true
}

// headerListSize is the HTTP/2 size of a header list (name + value + 32 per field), compared
// with the peer's SETTINGS_MAX_HEADER_LIST_SIZE.
func headerListSize(hf []hpack.HeaderField) uint64 {
	var n uint64
	for _, f := range hf {
		n += uint64(f.Size())
	}
	return n
}

// mdBuilder collects the metadata of a header block. Every key's values are a slice of one
// shared array, with its capacity cut to its length (appending to a repeated key copies, and
// never overwrites the next key's value): a block costs one allocation for all its values
// instead of one per key.
type mdBuilder struct {
	md   metadata.MD // nil until the first add
	vals []string
}

// add appends v to k's values; the first add makes the map and the array, sized for n fields.
func (b *mdBuilder) add(k, v string, n int) {
	if b.md == nil {
		b.md, b.vals = make(metadata.MD, n), make([]string, 0, n)
	}
	if old, ok := b.md[k]; ok {
		b.md[k] = append(old, v)
		return
	}
	b.vals = append(b.vals, v)
	i := len(b.vals)
	b.md[k] = b.vals[i-1 : i : i]
}
