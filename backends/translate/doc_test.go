package translate

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TestVersionsDocNamesEveryMethod keeps docs/versions.md's table of methods in step with the
// code: every translated method, and every v1 method without a v0 equivalent (or its
// service), is named there.
func TestVersionsDocNamesEveryMethod(t *testing.T) {
	methods := versionsDocSection(t, "### Methods")
	named := func(full string) bool {
		_, rest, _ := strings.Cut(strings.TrimPrefix(full, "/"), ".v")
		rest = rest[strings.Index(rest, ".")+1:] // "Controller/CreateVolume"
		service, _, _ := strings.Cut(rest, "/")
		return strings.Contains(methods, "`"+rest+"`") || strings.Contains(methods, "`"+service+"/*`")
	}
	for m := range translations {
		if !named(m) {
			t.Errorf("docs/versions.md's methods table does not name %s", m)
		}
	}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "csi.v1" {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				full := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				if !named(full) {
					t.Errorf("docs/versions.md's methods table does not name %s (no v0 equivalent)", full)
				}
			}
		}
		return true
	})
}

// versionsDocSection is the text of docs/versions.md under heading, to the next ### heading.
func versionsDocSection(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/versions.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatalf("docs/versions.md has no %s section", heading)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	return section
}
