package connect

import (
	"testing"

	"google.golang.org/grpc/codes"
)

func TestCodeTable(t *testing.T) {
	tests := []struct {
		code   codes.Code
		name   string
		status int
	}{
		{codes.Canceled, "canceled", 499},
		{codes.Unknown, "unknown", 500},
		{codes.InvalidArgument, "invalid_argument", 400},
		{codes.DeadlineExceeded, "deadline_exceeded", 504},
		{codes.NotFound, "not_found", 404},
		{codes.AlreadyExists, "already_exists", 409},
		{codes.PermissionDenied, "permission_denied", 403},
		{codes.ResourceExhausted, "resource_exhausted", 429},
		{codes.FailedPrecondition, "failed_precondition", 400},
		{codes.Aborted, "aborted", 409},
		{codes.OutOfRange, "out_of_range", 400},
		{codes.Unimplemented, "unimplemented", 501},
		{codes.Internal, "internal", 500},
		{codes.Unavailable, "unavailable", 503},
		{codes.DataLoss, "data_loss", 500},
		{codes.Unauthenticated, "unauthenticated", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CodeName(tt.code); got != tt.name {
				t.Errorf("CodeName(%v) = %q, want %q", tt.code, got, tt.name)
			}
			if got := HTTPStatus(tt.code); got != tt.status {
				t.Errorf("HTTPStatus(%v) = %d, want %d", tt.code, got, tt.status)
			}
			if got, ok := ParseCodeName(tt.name); !ok || got != tt.code {
				t.Errorf("ParseCodeName(%q) = %v, %v; want %v, true", tt.name, got, ok, tt.code)
			}
		})
	}
}

func TestCodeOutsideTable(t *testing.T) {
	tests := []struct {
		code   codes.Code
		name   string
		status int
	}{
		{codes.OK, "", 200},
		{codes.Code(17), "unknown", 500},
		{codes.Code(1 << 31), "unknown", 500},
	}
	for _, tt := range tests {
		if got := CodeName(tt.code); got != tt.name {
			t.Errorf("CodeName(%d) = %q, want %q", tt.code, got, tt.name)
		}
		if got := HTTPStatus(tt.code); got != tt.status {
			t.Errorf("HTTPStatus(%d) = %d, want %d", tt.code, got, tt.status)
		}
	}
}

func TestParseCodeNameRejects(t *testing.T) {
	for _, name := range []string{"", "ok", "NOT_FOUND", "Not_Found", "cancelled", " not_found", "5"} {
		if c, ok := ParseCodeName(name); ok {
			t.Errorf("ParseCodeName(%q) = %v, true; want false", name, c)
		}
	}
}

func TestCodeFromHTTPStatus(t *testing.T) {
	tests := []struct {
		status int
		want   codes.Code
	}{
		{400, codes.Internal},
		{401, codes.Unauthenticated},
		{403, codes.PermissionDenied},
		{404, codes.Unimplemented},
		{429, codes.Unavailable},
		{502, codes.Unavailable},
		{503, codes.Unavailable},
		{504, codes.Unavailable},
		{200, codes.Unknown},
		{405, codes.Unknown},
		{409, codes.Unknown},
		{413, codes.Unknown},
		{500, codes.Unknown},
		{501, codes.Unknown},
		{0, codes.Unknown},
	}
	for _, tt := range tests {
		if got := CodeFromHTTPStatus(tt.status); got != tt.want {
			t.Errorf("CodeFromHTTPStatus(%d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}
