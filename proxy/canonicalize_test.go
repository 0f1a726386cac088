package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/redact"
)

func TestBoundMessage(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantLen int  // bytes of the result
		wantCut bool // the result is a prefix of in followed by "…"
	}{
		{"empty", "", 0, false},
		{"short", "backend \"a\": volume not found", len("backend \"a\": volume not found"), false},
		{"exactly 1 KiB", strings.Repeat("x", 1024), 1024, false},
		{"one byte over", strings.Repeat("x", 1025), 1024, true},
		{"far over", strings.Repeat("x", 100_000), 1024, true},
		// 2-byte runes from offset 0: byte 1021 is a continuation byte, so the cut moves to 1020.
		{"two-byte runes", strings.Repeat("é", 600), 1020 + len("…"), true},
		// 3-byte runes: 1021 = 3·340 + 1 is inside a rune; 1020 starts one.
		{"three-byte runes", strings.Repeat("€", 400), 1020 + len("…"), true},
		// 4-byte runes: 1021 = 4·255 + 1 is inside one; 1020 starts one.
		{"four-byte runes", strings.Repeat("😀", 300), 1020 + len("…"), true},
		// One ASCII byte first: 1021 = 1 + 4·255 starts a rune, so nothing is lost.
		{"four-byte runes after one byte", "a" + strings.Repeat("😀", 300), 1024, true},
		// 4-byte runes after two bytes: runes start at 2+4k; 1021 and 1019 do not, 1018 does.
		{"four-byte runes after two bytes", "ab" + strings.Repeat("😀", 300), 1018 + len("…"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := boundMessage(tt.in)
			if len(got) != tt.wantLen {
				t.Errorf("len = %d, want %d", len(got), tt.wantLen)
			}
			if len(got) > maxMessageBytes {
				t.Errorf("len = %d, over %d", len(got), maxMessageBytes)
			}
			if !utf8.ValidString(got) {
				t.Errorf("result is not valid UTF-8: %q", got[max(0, len(got)-8):])
			}
			if !tt.wantCut {
				if got != tt.in {
					t.Errorf("boundMessage changed a message that fits")
				}
				return
			}
			prefix, ok := strings.CutSuffix(got, "…")
			if !ok || !strings.HasPrefix(tt.in, prefix) {
				t.Errorf("result is not a prefix of the input followed by \"…\": ...%q", got[max(0, len(got)-12):])
			}
		})
	}
}

// canonicalizeCanary is a secret value sent in requests to check that it is scrubbed.
const canonicalizeCanary = "CANON-CANARY-5e1d0b-pw"

func TestCanonicalize(t *testing.T) {
	const (
		createVolume = "/csi.v1.Controller/CreateVolume"
		deleteVolume = "/csi.v1.Controller/DeleteVolume"
		unpublish    = "/csi.v1.Controller/ControllerUnpublishVolume"
		nodeUnstage  = "/csi.v1.Node/NodeUnstageVolume"
		deleteGroup  = "/volumegroup.Controller/DeleteVolumeGroup"
		unknown      = "/example.v1.Storage/Wipe"
	)
	withDetails, err := status.New(codes.NotFound, "volume v1 does not exist").
		WithDetails(&errdetails.ErrorInfo{Reason: "NO_VOLUME", Domain: "array.example"})
	if err != nil {
		t.Fatal(err)
	}
	long := "backend \"a\": " + strings.Repeat("very long explanation ", 200)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()

	tests := []struct {
		name    string
		method  string
		ctx     context.Context // nil: Background
		err     error           // what the rest of the chain returns
		resp    []byte          // what the rest of the chain sets as the response
		want    codes.Code
		wantMsg string // exact, when wantErr is nil
		// wantSame: the error must come back as it is (unknown methods).
		wantSame bool
	}{
		{name: "success", method: createVolume, resp: []byte{0x0a, 0x00}, want: codes.OK},

		// Classified backend errors: the class picks the code, the message is kept.
		{name: "not-found", method: createVolume, err: backends.Errorf(backends.ClassNotFound, `backend "a": source snapshot s1 not found`),
			want: codes.NotFound, wantMsg: `backend "a": source snapshot s1 not found`},
		{name: "already-exists", method: createVolume, err: backends.Errorf(backends.ClassAlreadyExists, `backend "a": volume pvc-1 exists with another size`),
			want: codes.AlreadyExists, wantMsg: `backend "a": volume pvc-1 exists with another size`},
		{name: "invalid", method: createVolume, err: backends.Errorf(backends.ClassInvalid, "m"), want: codes.InvalidArgument, wantMsg: "m"},
		{name: "precondition", method: deleteVolume, err: backends.Errorf(backends.ClassPrecondition, "m"), want: codes.FailedPrecondition, wantMsg: "m"},
		{name: "out-of-range", method: createVolume, err: backends.Errorf(backends.ClassOutOfRange, "m"), want: codes.OutOfRange, wantMsg: "m"},
		{name: "exhausted", method: createVolume, err: backends.Errorf(backends.ClassExhausted, "m"), want: codes.ResourceExhausted, wantMsg: "m"},
		{name: "aborted", method: createVolume, err: backends.Errorf(backends.ClassAborted, "m"), want: codes.Aborted, wantMsg: "m"},
		{name: "unavailable stays non-final", method: createVolume, err: backends.Errorf(backends.ClassUnavailable, "m"), want: codes.Unavailable, wantMsg: "m"},
		{name: "deadline stays non-final", method: createVolume, err: backends.Errorf(backends.ClassDeadline, "m"), want: codes.DeadlineExceeded, wantMsg: "m"},
		{name: "canceled", method: createVolume, err: backends.Errorf(backends.ClassCanceled, "m"), want: codes.Canceled, wantMsg: "m"},
		{name: "unauthenticated", method: createVolume, err: backends.Errorf(backends.ClassUnauthenticated, "m"), want: codes.Unauthenticated, wantMsg: "m"},
		{name: "permission", method: createVolume, err: backends.Errorf(backends.ClassPermission, "m"), want: codes.PermissionDenied, wantMsg: "m"},
		{name: "unimplemented", method: createVolume, err: backends.Errorf(backends.ClassUnimplemented, "m"), want: codes.Unimplemented, wantMsg: "m"},
		{name: "internal", method: createVolume, err: backends.Errorf(backends.ClassInternal, "m"), want: codes.Internal, wantMsg: "m"},
		{name: "class out of the set", method: createVolume, err: backends.Errorf(backends.Class(99), "m"), want: codes.Internal, wantMsg: "m"},
		{name: "wrapped class keeps the backend's message", method: createVolume,
			err:  fmt.Errorf("dispatch: %w", backends.Errorf(backends.ClassUnavailable, `backend "a": connection refused`)),
			want: codes.Unavailable, wantMsg: `backend "a": connection refused`},

		// The RPC-specific rules.
		{name: "DeleteVolume of a missing volume", method: deleteVolume, err: backends.Errorf(backends.ClassNotFound, "gone"), want: codes.OK},
		{name: "ControllerUnpublish of a missing volume", method: unpublish, err: backends.Errorf(backends.ClassNotFound, "gone"), want: codes.OK},
		{name: "NodeUnstage of a missing volume", method: nodeUnstage, err: status.Error(codes.NotFound, "gone"), want: codes.OK},
		{name: "DeleteVolumeGroup of a missing group", method: deleteGroup, err: withDetails.Err(), want: codes.OK},
		{name: "DeleteVolume other class keeps its code", method: deleteVolume, err: backends.Errorf(backends.ClassAborted, "busy"),
			want: codes.Aborted, wantMsg: "busy"},

		// gRPC statuses: the code gives the class, details are dropped.
		{name: "status keeps its code", method: createVolume, err: status.Error(codes.AlreadyExists, "exists"), want: codes.AlreadyExists, wantMsg: "exists"},
		{name: "status details are stripped", method: createVolume, err: withDetails.Err(), want: codes.NotFound, wantMsg: "volume v1 does not exist"},
		{name: "status unknown is internal", method: createVolume, err: status.Error(codes.Unknown, "what"), want: codes.Internal, wantMsg: "what"},
		{name: "status data loss is internal", method: createVolume, err: status.Error(codes.DataLoss, "lost"), want: codes.Internal, wantMsg: "lost"},
		// grpc's status.FromError gives a wrapped status the whole error text as its message.
		{name: "wrapped status keeps its code", method: createVolume, err: fmt.Errorf("x: %w", status.Error(codes.Unavailable, "down")),
			want: codes.Unavailable, wantMsg: "x: rpc error: code = Unavailable desc = down"},

		// Plain and context errors.
		{name: "plain error is internal", method: createVolume, err: errors.New("boom"), want: codes.Internal, wantMsg: "boom"},
		{name: "context canceled", method: createVolume, err: context.Canceled, want: codes.Canceled, wantMsg: "context canceled"},
		{name: "context deadline", method: createVolume, err: fmt.Errorf("post: %w", context.DeadlineExceeded),
			want: codes.DeadlineExceeded, wantMsg: "post: context deadline exceeded"},
		{name: "caller gone turns unavailable into canceled", method: createVolume, ctx: canceled,
			err: backends.Errorf(backends.ClassUnavailable, "m"), want: codes.Canceled, wantMsg: "m"},
		{name: "caller out of time turns unavailable into deadline", method: createVolume, ctx: expired,
			err: backends.Errorf(backends.ClassUnavailable, "m"), want: codes.DeadlineExceeded, wantMsg: "m"},
		{name: "caller out of time turns not-found into deadline, even for DeleteVolume", method: deleteVolume, ctx: expired,
			err: backends.Errorf(backends.ClassNotFound, "m"), want: codes.DeadlineExceeded, wantMsg: "m"},
		{name: "caller gone keeps a deadline", method: createVolume, ctx: canceled,
			err: backends.Errorf(backends.ClassDeadline, "m"), want: codes.DeadlineExceeded, wantMsg: "m"},

		// Messages are never empty and never longer than 1 KiB.
		{name: "empty class message", method: createVolume, err: backends.Errorf(backends.ClassNotFound, ""),
			want: codes.NotFound, wantMsg: "the backend failed (not-found) without saying why"},
		{name: "empty status message", method: createVolume, err: status.Error(codes.Unavailable, ""),
			want: codes.Unavailable, wantMsg: "the backend failed (unavailable) without saying why"},
		{name: "empty plain error", method: createVolume, err: errors.New(""),
			want: codes.Internal, wantMsg: "the backend failed (internal) without saying why"},
		{name: "long message is bounded", method: createVolume, err: backends.Errorf(backends.ClassInternal, "%s", long),
			want: codes.Internal, wantMsg: boundMessage(long)},

		// Methods the gateway does not know are not CSI: statuses pass through.
		{name: "unknown method status passes", method: unknown, err: withDetails.Err(), wantSame: true},
		{name: "unknown method empty status passes", method: unknown, err: status.Error(codes.Unknown, ""), wantSame: true},
		{name: "unknown method plain error is canonicalized", method: unknown, err: errors.New("boom"), want: codes.Internal, wantMsg: "boom"},
		{name: "unknown method class is canonicalized", method: unknown, err: backends.Errorf(backends.ClassUnavailable, "down"),
			want: codes.Unavailable, wantMsg: "down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			call := &Call{Method: tt.method, info: lookupMethod(tt.method)}
			h := canonicalize(redact.NewRedactor(), nil)(func(context.Context, *Call) error {
				call.Response = tt.resp
				return tt.err
			})
			err := h(ctx, call)
			if tt.wantSame {
				got, want := status.Convert(err).Proto(), status.Convert(tt.err).Proto()
				if !proto.Equal(got, want) {
					t.Fatalf("got %v, want the status passed through unchanged: %v", err, tt.err)
				}
				return
			}
			st, ok := status.FromError(err)
			if !ok {
				t.Fatalf("not a status: %T %v", err, err)
			}
			if st.Code() != tt.want {
				t.Fatalf("code = %v (%q), want %v", st.Code(), st.Message(), tt.want)
			}
			if tt.want == codes.OK {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				if tt.err != nil && (call.Response == nil || len(call.Response) != 0) {
					t.Errorf("Response = %#v, want an empty non-nil message", call.Response)
				}
				if tt.err == nil && string(call.Response) != string(tt.resp) {
					t.Errorf("Response = %x, want the backend's %x", call.Response, tt.resp)
				}
				return
			}
			if st.Message() != tt.wantMsg {
				t.Errorf("message = %q, want %q", st.Message(), tt.wantMsg)
			}
			if st.Message() == "" || len(st.Message()) > maxMessageBytes {
				t.Errorf("message is %d bytes, want 1..%d", len(st.Message()), maxMessageBytes)
			}
			if d := st.Proto().GetDetails(); len(d) != 0 {
				t.Errorf("details = %v, want none", d)
			}
		})
	}
}

// TestCanonicalizeScrubsSecrets: the secret values of the request never reach the caller in
// an error message, in any of the encodings a backend may echo them in.
func TestCanonicalizeScrubsSecrets(t *testing.T) {
	const method = "/csi.v1.Controller/CreateVolume"
	req, err := proto.Marshal(&csi.CreateVolumeRequest{
		Name:    "pvc-1",
		Secrets: map[string]string{"password": canonicalizeCanary, "user": "admin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(canonicalizeCanary))
	tests := []struct {
		name    string
		err     error
		want    codes.Code
		wantMsg string
	}{
		{"class message", backends.Errorf(backends.ClassUnauthenticated, `backend "a": login with password %s refused`, canonicalizeCanary),
			codes.Unauthenticated, `backend "a": login with password *** refused`},
		{"status message, twice", status.Error(codes.PermissionDenied, "pw="+canonicalizeCanary+" again "+canonicalizeCanary),
			codes.PermissionDenied, "pw=*** again ***"},
		{"base64 echo", errors.New("Authorization: Basic " + b64), codes.Internal, "Authorization: Basic ***"},
		{"secret beyond 1 KiB", backends.Errorf(backends.ClassInternal, "%s%s", strings.Repeat("y", 1010), canonicalizeCanary),
			codes.Internal, boundMessage(strings.Repeat("y", 1010) + "***")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := &Call{Method: method, Request: req, info: lookupMethod(method)}
			if call.info == nil {
				t.Fatal("CreateVolume is not known")
			}
			h := canonicalize(redact.NewRedactor(), nil)(func(context.Context, *Call) error { return tt.err })
			st := status.Convert(h(context.Background(), call))
			if st.Code() != tt.want || st.Message() != tt.wantMsg {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tt.want, tt.wantMsg)
			}
			for _, leak := range []string{canonicalizeCanary, b64, canonicalizeCanary[:8]} {
				if strings.Contains(st.Message(), leak) {
					t.Errorf("message leaks %q: %q", leak, st.Message())
				}
			}
		})
	}
}

// TestProbeThroughServer: the spec's Probe through a real Server. A backend that cannot be
// reached (down, circuit open, draining) or does not answer in time is a plugin that is not
// healthy: FAILED_PRECONDITION with the backend's reason. A backend that answers, ready=false
// included, passes through.
func TestProbeThroughServer(t *testing.T) { onEachTransport(t, testProbeThroughServer) }

func testProbeThroughServer(t *testing.T, tr Transport) {
	answer := func(resp *csi.ProbeResponse, err error) func(context.Context, string, []byte) ([]byte, error) {
		return func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
			if err != nil {
				return nil, err
			}
			return proto.Marshal(resp)
		}
	}
	hang := func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		<-ctx.Done()
		return nil, backends.Errorf(backends.ClassDeadline, `backend "fake": no answer from the driver within the deadline`)
	}
	down := `backend "fake": cannot reach the driver at unix:///csi/driver.sock (connection refused); is the driver running? check backends.fake.target`
	tests := []struct {
		name      string
		backend   func(context.Context, string, []byte) ([]byte, error)
		wantCode  codes.Code
		wantMsg   string
		wantReady *wrapperspb.BoolValue // when OK: nil for absent
	}{
		{"ready", answer(&csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil), codes.OK, "", wrapperspb.Bool(true)},
		{"ready absent", answer(&csi.ProbeResponse{}, nil), codes.OK, "", nil},
		{"still starting", answer(&csi.ProbeResponse{Ready: wrapperspb.Bool(false)}, nil), codes.OK, "", wrapperspb.Bool(false)},
		{"backend down", answer(nil, backends.Errorf(backends.ClassUnavailable, "%s", down)), codes.FailedPrecondition, down, nil},
		{"circuit open", answer(nil, backends.Errorf(backends.ClassUnavailable, `backend "fake": circuit open after 5 failures; retrying in 10s`)),
			codes.FailedPrecondition, `backend "fake": circuit open after 5 failures; retrying in 10s`, nil},
		{"driver says unavailable", answer(nil, status.Error(codes.Unavailable, "array controller rebooting")),
			codes.FailedPrecondition, "array controller rebooting", nil},
		{"no answer in time", hang, codes.FailedPrecondition,
			`backend "fake": no answer from the driver within the deadline`, nil},
		{"driver broken", answer(nil, backends.Errorf(backends.ClassInternal, `backend "fake": probe failed: disk controller error`)),
			codes.Internal, `backend "fake": probe failed: disk controller error`, nil},
	}
	// The gateway's own deadline for Probe ends the hanging case quickly; the caller's longer
	// deadline is capped to it.
	timeouts, err := NewTimeouts(TimeoutConfig{Overrides: []MethodTimeout{
		{Methods: []string{"/csi.v1.Identity/Probe"}, Max: 200 * time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := serverFakeOptions(&serverFake{answer: tt.backend})
			opts.Timeouts = timeouts
			ts := startServerHarness(t, tr, opts, ListenerPolicy{}, slog.LevelInfo)
			resp, err := csi.NewIdentityClient(ts.conn).Probe(serverCallCtx(t), &csi.ProbeRequest{})
			st := status.Convert(err)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
				t.Fatalf("got %v %q\nwant %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
			}
			if len(st.Details()) != 0 {
				t.Errorf("details %v, want none", st.Details())
			}
			if err != nil {
				return
			}
			if r := resp.GetReady(); !proto.Equal(r, tt.wantReady) {
				t.Errorf("ready = %v, want %v", r, tt.wantReady)
			}
		})
	}
}
