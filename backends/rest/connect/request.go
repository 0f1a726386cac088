package connect

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// isJSON reports whether a Content-Type names application/json, with no charset or utf-8.
func isJSON(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

// hopByHop are headers about the HTTP connection or the body framing, not the call; they
// never become metadata. Headers starting with "connect-" are the protocol's own.
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true, "proxy-authenticate": true,
	"proxy-authorization": true, "te": true, "trailer": true, "transfer-encoding": true,
	"upgrade": true, "content-length": true, "content-type": true,
}

// requestContext derives the call's context from the request: its deadline from
// Connect-Timeout-Ms and its incoming metadata from the headers. The returned cancel must
// always be called. A malformed header yields an invalid_argument status.
func requestContext(r *http.Request) (context.Context, context.CancelFunc, *status.Status) {
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if v, ok := r.Header["Connect-Timeout-Ms"]; ok {
		d, err := parseTimeout(v)
		if err != nil {
			return ctx, cancel, status.Newf(codes.InvalidArgument, "connect: Connect-Timeout-Ms: %v", err)
		}
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	if v, ok := r.Header["Connect-Protocol-Version"]; ok && (len(v) != 1 || v[0] != "1") {
		return ctx, cancel, status.Newf(codes.InvalidArgument, "connect: Connect-Protocol-Version %q is not supported; send 1", v)
	}
	skip := make(map[string]bool)
	for _, v := range r.Header.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			skip[strings.ToLower(strings.TrimSpace(f))] = true
		}
	}
	md := metadata.MD{}
	for k, vs := range r.Header {
		key := strings.ToLower(k)
		if hopByHop[key] || skip[key] || strings.HasPrefix(key, "connect-") {
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(key, "-bin") {
				b, err := decodeBinaryHeader(v)
				if err != nil {
					return ctx, cancel, status.Newf(codes.InvalidArgument, "connect: header %s is not base64: %v", k, err)
				}
				v = string(b)
			}
			md[key] = append(md[key], v)
		}
	}
	return metadata.NewIncomingContext(ctx, md), cancel, nil
}

// parseTimeout parses the protocol's Timeout-Milliseconds: a positive integer of at most 10
// ASCII digits.
func parseTimeout(v []string) (time.Duration, error) {
	if len(v) != 1 || len(v[0]) == 0 || len(v[0]) > 10 || strings.Trim(v[0], "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a positive integer of at most 10 digits", v)
	}
	ms, _ := strconv.ParseInt(v[0], 10, 64) // cannot fail: at most 10 digits
	if ms == 0 {
		return 0, errors.New("must be positive")
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// decodeBinaryHeader decodes a "-bin" header value, padded or not, as the protocol requires.
func decodeBinaryHeader(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}
