package connect

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// wireError is the Connect error body. Details are never sent.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// writeStatus answers st with the HTTP status the code table gives it.
func writeStatus(w http.ResponseWriter, st *status.Status) {
	writeError(w, HTTPStatus(st.Code()), st)
}

// writeError answers st with httpStatus. A google.rpc.RetryInfo detail, the only detail
// looked at, becomes a Retry-After header in whole seconds, rounded up.
func writeError(w http.ResponseWriter, httpStatus int, st *status.Status) {
	body, _ := json.Marshal(wireError{Code: CodeName(st.Code()), Message: st.Message()}) // cannot fail: two strings
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			secs := math.Ceil(ri.GetRetryDelay().AsDuration().Seconds())
			w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(body)
}

// toStatus converts an implementation's error: a status keeps its code and message (a
// wrapped one keeps its code, with the whole error text as message, as in grpc-go), a bare
// context error becomes canceled or deadline_exceeded, and anything else is internal with
// its text as message, and logged, because a CSI service should only return statuses.
func (h *handler) toStatus(path string, err error) *status.Status {
	if st, ok := status.FromError(err); ok {
		return st
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err)
	}
	h.cfg.log.Error("connect: method returned a non-status error; answering internal", "path", path, "error", err)
	return status.New(codes.Internal, err.Error())
}
