package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

// misbehavingDoc documents the rows of misbehavingRows; its table is generated from them.
const misbehavingDoc = "../../docs/validation.md"

const (
	misbehavingBegin = "<!-- BEGIN GENERATED: TestMisbehavingDocMatchesTable -->\n"
	misbehavingEnd   = "<!-- END GENERATED -->"
)

// renderMisbehavingTable is the doc's table of misbehavingRows.
func renderMisbehavingTable() string {
	var b strings.Builder
	b.WriteString("| REQUIREMENTS § | the backend… | on | the caller gets | why |\n|---|---|---|---|---|\n")
	for _, r := range misbehavingRows() {
		on := "both"
		if r.only != "" {
			on = map[string]string{"grpc": "gRPC driver", "http": "HTTP appliance"}[r.only]
		}
		got := r.want.String()
		if r.want == codes.OK {
			got = "OK"
		}
		if r.local {
			got += " (the backend is not called)"
		}
		why := r.why
		if r.driver != nil {
			got += "; from a gRPC driver (`repair: spec`, its default): " + r.driver.want.String()
			why += "; from a gRPC driver: " + r.driver.why
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.rule, r.name, on, got, why)
	}
	return b.String()
}

// TestMisbehavingDocMatchesTable keeps docs/validation.md's table of misbehaving backends
// and misbehavingRows from drifting: every row has a why, and the doc shows every row.
func TestMisbehavingDocMatchesTable(t *testing.T) {
	for _, r := range misbehavingRows() {
		if r.why == "" {
			t.Errorf("row %q says no why", r.name)
		}
	}
	doc, err := os.ReadFile(misbehavingDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), misbehavingBegin)
	_, after, ok2 := strings.Cut(rest, misbehavingEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the generated-section markers", misbehavingDoc)
	}
	want := before + misbehavingBegin + renderMisbehavingTable() + misbehavingEnd + after
	if want == string(doc) {
		return
	}
	if os.Getenv("CSIGWTEST_UPDATE_DOCS") != "" {
		if err := os.WriteFile(misbehavingDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date with misbehavingRows; run CSIGWTEST_UPDATE_DOCS=1 go test ./test/e2e -run MisbehavingDoc", misbehavingDoc)
}
