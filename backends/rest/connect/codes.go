package connect

import (
	"net/http"

	"google.golang.org/grpc/codes"
)

// codeInfo is one row of the Connect protocol's error-code table.
type codeInfo struct {
	name   string // Connect code name, as sent in the "code" field of an error body
	status int    // HTTP status that carries an error of this code
}

// codeTable is the Connect protocol's "Error Codes" table, indexed by gRPC code
// (https://connectrpc.com/docs/protocol#error-codes, after RFC 148, which moved canceled to
// 499, deadline_exceeded to 504, failed_precondition to 400 and unimplemented to 501).
// codes.OK has no Connect name: success is a 200 with the response message, never an error
// body.
var codeTable = [...]codeInfo{
	codes.OK:                 {"", http.StatusOK},
	codes.Canceled:           {"canceled", 499}, // Client Closed Request; net/http has no constant
	codes.Unknown:            {"unknown", http.StatusInternalServerError},
	codes.InvalidArgument:    {"invalid_argument", http.StatusBadRequest},
	codes.DeadlineExceeded:   {"deadline_exceeded", http.StatusGatewayTimeout},
	codes.NotFound:           {"not_found", http.StatusNotFound},
	codes.AlreadyExists:      {"already_exists", http.StatusConflict},
	codes.PermissionDenied:   {"permission_denied", http.StatusForbidden},
	codes.ResourceExhausted:  {"resource_exhausted", http.StatusTooManyRequests},
	codes.FailedPrecondition: {"failed_precondition", http.StatusBadRequest},
	codes.Aborted:            {"aborted", http.StatusConflict},
	codes.OutOfRange:         {"out_of_range", http.StatusBadRequest},
	codes.Unimplemented:      {"unimplemented", http.StatusNotImplemented},
	codes.Internal:           {"internal", http.StatusInternalServerError},
	codes.Unavailable:        {"unavailable", http.StatusServiceUnavailable},
	codes.DataLoss:           {"data_loss", http.StatusInternalServerError},
	codes.Unauthenticated:    {"unauthenticated", http.StatusUnauthorized},
}

// codeByName inverts codeTable; it is derived, not written, so the two cannot disagree.
var codeByName = func() map[string]codes.Code {
	m := make(map[string]codes.Code, len(codeTable))
	for c, info := range codeTable {
		if info.name != "" {
			m[info.name] = codes.Code(c)
		}
	}
	return m
}()

// httpStatusCodes is the Connect protocol's "HTTP to Error Code" table: the code a client
// infers from a non-200 answer that carries no valid error body (a proxy's error page, an
// empty 502). It is deliberately not the inverse of codeTable: the spec follows gRPC's
// HTTP mapping here, so 400 means internal (a broken request is the client's bug) and 404
// means unimplemented (no such route).
var httpStatusCodes = map[int]codes.Code{
	http.StatusBadRequest:         codes.Internal,
	http.StatusUnauthorized:       codes.Unauthenticated,
	http.StatusForbidden:          codes.PermissionDenied,
	http.StatusNotFound:           codes.Unimplemented,
	http.StatusTooManyRequests:    codes.Unavailable,
	http.StatusBadGateway:         codes.Unavailable,
	http.StatusServiceUnavailable: codes.Unavailable,
	http.StatusGatewayTimeout:     codes.Unavailable,
}

// CodeName returns the Connect name of c, such as "not_found". A code outside the gRPC set
// is reported as "unknown", as the spec requires; codes.OK, which has no Connect name,
// returns "".
func CodeName(c codes.Code) string {
	if int(c) >= len(codeTable) {
		return codeTable[codes.Unknown].name
	}
	return codeTable[c].name
}

// ParseCodeName returns the gRPC code whose Connect name is exactly name (case-sensitive, as
// on the wire). It reports false for anything else, including "" and "ok"; a client should
// then treat the error as codes.Unknown.
func ParseCodeName(name string) (codes.Code, bool) {
	c, ok := codeByName[name]
	return c, ok
}

// HTTPStatus returns the HTTP status that carries an error of code c: 404 for NotFound, 503
// for Unavailable, and so on. A code outside the gRPC set maps like codes.Unknown (500);
// codes.OK maps to 200.
func HTTPStatus(c codes.Code) int {
	if int(c) >= len(codeTable) {
		return codeTable[codes.Unknown].status
	}
	return codeTable[c].status
}

// CodeFromHTTPStatus returns the code a client infers from a non-200 HTTP status when the
// body carries no valid Connect error, following the spec's "HTTP to Error Code" table: 400
// internal, 401 unauthenticated, 403 permission_denied, 404 unimplemented, 429, 502, 503 and
// 504 unavailable, every other status unknown. Use it only when the body has no code: a
// valid body's code always wins over the status.
func CodeFromHTTPStatus(status int) codes.Code {
	if c, ok := httpStatusCodes[status]; ok {
		return c
	}
	return codes.Unknown
}
