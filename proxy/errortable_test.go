package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp"
)

// errorsDoc is the file that documents the canonical error table.
const errorsDoc = "../docs/errors.md"

// renderErrorTable is the generated part of docs/errors.md.
func renderErrorTable() string {
	var b strings.Builder
	b.WriteString("| RPC | backend failure (class) | caller gets | why |\n|---|---|---|---|\n")
	for _, r := range errorRules {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", strings.Join(r.methods, "<br>"), r.class, r.code, r.why)
	}
	b.WriteString("\nEvery other failure, for every RPC:\n\n| backend failure (class) | caller gets |\n|---|---|\n")
	for c := backends.ClassInternal; c <= backends.ClassUnimplemented; c++ {
		fmt.Fprintf(&b, "| %s | %s |\n", c, c.Code())
	}
	b.WriteString("\n### CSP backends (`protocol: csp`): how a CSP's answers are classified\n\n" +
		"The first matching row wins; the class then takes its code from the tables above. " +
		"Creates look the name up again before classifying a failed POST, and 401 is answered by one fresh login and one retry first.\n\n" +
		"| CSI RPC | CSP answer | class | why |\n|---|---|---|---|\n")
	for _, r := range csp.StatusRules() {
		rpcs := "every RPC"
		if len(r.RPCs) > 0 {
			rpcs = strings.Join(r.RPCs, "<br>")
		}
		answer := fmt.Sprint(r.Status)
		if r.When != "" {
			answer += ", " + r.When
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", rpcs, answer, r.Class, r.Why)
	}
	return b.String()
}

const (
	beginMarker = "<!-- BEGIN GENERATED: TestErrorsDocMatchesTable -->\n"
	endMarker   = "<!-- END GENERATED -->"
)

// TestErrorsDocMatchesTable keeps docs/errors.md and the code in agreement. Run it with
// CSIGW_UPDATE_DOCS=1 to rewrite the generated part of the doc.
func TestErrorsDocMatchesTable(t *testing.T) {
	doc, err := os.ReadFile(errorsDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), beginMarker)
	_, after, ok2 := strings.Cut(rest, endMarker)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the generated-section markers", errorsDoc)
	}
	want := before + beginMarker + renderErrorTable() + endMarker + after
	if want == string(doc) {
		return
	}
	if os.Getenv("CSIGW_UPDATE_DOCS") != "" {
		if err := os.WriteFile(errorsDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date with errorRules; run CSIGW_UPDATE_DOCS=1 go test ./proxy -run ErrorsDoc", errorsDoc)
}

func TestCanonicalCode(t *testing.T) {
	for _, tc := range []struct {
		method string
		class  backends.Class
		want   codes.Code
	}{
		{"/csi.v1.Controller/DeleteVolume", backends.ClassNotFound, codes.OK},
		{"/csi.v1.Controller/DeleteSnapshot", backends.ClassNotFound, codes.OK},
		{"/volumegroup.Controller/DeleteVolumeGroup", backends.ClassNotFound, codes.OK},
		{"/csi.v1.Node/NodeUnpublishVolume", backends.ClassNotFound, codes.OK},
		{"/csi.v1.Controller/ControllerUnpublishVolume", backends.ClassNotFound, codes.OK},
		{"/csi.v1.Controller/ControllerPublishVolume", backends.ClassNotFound, codes.NotFound},
		{"/csi.v1.Controller/CreateVolume", backends.ClassUnavailable, codes.Unavailable},
		{"/csi.v1.Controller/CreateVolume", backends.ClassDeadline, codes.DeadlineExceeded},
		{"/csi.v1.Controller/CreateVolume", backends.ClassAlreadyExists, codes.AlreadyExists},
		{"/csi.v1.Controller/DeleteVolume", backends.ClassPrecondition, codes.FailedPrecondition},
		{"/csi.v1.Identity/Probe", backends.ClassUnavailable, codes.FailedPrecondition},
		{"/csi.v1.Identity/Probe", backends.ClassDeadline, codes.FailedPrecondition},
		{"/csi.v1.Identity/Probe", backends.ClassInternal, codes.Internal},
		{"/csi.v1.Identity/Probe", backends.ClassUnimplemented, codes.Unimplemented},
		{"/csi.v1.Identity/GetPluginInfo", backends.ClassUnavailable, codes.Unavailable},
	} {
		if got := canonicalCode(tc.method, tc.class); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.method, tc.class, got, tc.want)
		}
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
