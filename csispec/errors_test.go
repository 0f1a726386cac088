package csispec

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp"
)

// errorsDoc is the file that documents the canonical error table.
const errorsDoc = "../docs/errors.md"

// renderErrorTable is the generated part of docs/errors.md.
func renderErrorTable() string {
	var b strings.Builder
	b.WriteString("| RPC | backend failure (class) | caller gets | applies under `repair:` | why |\n|---|---|---|---|---|\n")
	for _, r := range errorRules {
		applies := "plugin"
		if r.required {
			applies = "plugin, spec"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", strings.Join(r.methods, "<br>"), r.class, r.code, applies, r.why)
	}
	b.WriteString("\nEvery other failure, for every RPC (under `repair: spec` and `none`, a driver's own status keeps its code; " +
		"these are the codes of the failures the gateway itself reports, and of every failure under `plugin`):\n\n| backend failure (class) | caller gets |\n|---|---|\n")
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
// CSIGWTEST_UPDATE_DOCS=1 to rewrite the generated part of the doc.
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
	if os.Getenv("CSIGWTEST_UPDATE_DOCS") != "" {
		if err := os.WriteFile(errorsDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date with errorRules; run CSIGWTEST_UPDATE_DOCS=1 go test ./csispec -run ErrorsDoc", errorsDoc)
}

func TestErrorCode(t *testing.T) {
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
		if got := ErrorCode(tc.method, tc.class); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.method, tc.class, got, tc.want)
		}
	}
}
