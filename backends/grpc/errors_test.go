package grpcbackend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	b := &Backend{name: "drv", target: "unix:///run/d.sock"}
	tgt := &target{addr: "unix:///run/d.sock", key: "backends.drv.target"}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	// A deadline already past.
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()
	long := strings.Repeat("é", 2000)

	tests := []struct {
		name    string
		ctx     context.Context
		err     error
		reached bool
		class   backends.Class
		message string
	}{
		{"driver status", context.Background(), status.Error(codes.NotFound, "volume v1 not found"), true,
			backends.ClassNotFound, `backend "drv": volume v1 not found`},
		{"driver unavailable", context.Background(), status.Error(codes.Unavailable, "array busy"), true,
			backends.ClassUnavailable, `backend "drv": array busy`},
		{"not connected", context.Background(), status.Error(codes.Unavailable, "dial failed"), false,
			backends.ClassUnavailable, `backend "drv": cannot reach the driver at unix:///run/d.sock (dial failed); is the driver running? check backends.drv.target`},
		{"connection lost", context.Background(), status.Error(codes.Unavailable, "error reading from server: EOF"), true,
			backends.ClassUnavailable, `backend "drv": cannot reach the driver at unix:///run/d.sock (error reading from server: EOF); is the driver running? check backends.drv.target`},
		{"empty message", context.Background(), status.Error(codes.Aborted, ""), true,
			backends.ClassAborted, `backend "drv": the driver returned Aborted without a message`},
		{"caller canceled", canceled, status.Error(codes.Canceled, "context canceled"), true,
			backends.ClassCanceled, `backend "drv": the caller canceled the call`},
		{"deadline passed", expired, status.Error(codes.DeadlineExceeded, "stream terminated by RST_STREAM with error code: CANCEL"), true,
			backends.ClassDeadline, `backend "drv": no answer from the driver within the deadline`},
		{"driver's own deadline", context.Background(), status.Error(codes.DeadlineExceeded, "array timed out"), true,
			backends.ClassDeadline, `backend "drv": array timed out`},
		{"context error", canceled, context.Canceled, false,
			backends.ClassCanceled, `backend "drv": the caller canceled the call`},
		{"already classified", context.Background(), backends.Errorf(backends.ClassPermission, "kept"), true,
			backends.ClassPermission, `kept`},
		{"plain error", context.Background(), errors.New("boom"), true,
			backends.ClassInternal, `backend "drv": boom`},
		{"long message", context.Background(), status.Error(codes.Internal, long), true,
			backends.ClassInternal, backends.Truncate(`backend "drv": `+long, backends.MaxMessageBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := b.classify(tt.ctx, tgt, tt.err, tt.reached, "")
			if be.Class != tt.class || be.Message != tt.message {
				t.Errorf("got %v %q\nwant %v %q", be.Class, be.Message, tt.class, tt.message)
			}
			if len(be.Message) > backends.MaxMessageBytes {
				t.Errorf("message is %d bytes", len(be.Message))
			}
		})
	}
}
