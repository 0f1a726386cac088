package proxy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/backends"
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
	} {
		if got := canonicalCode(tc.method, tc.class); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.method, tc.class, got, tc.want)
		}
	}
}
