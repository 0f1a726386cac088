package translate

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-gateway/csi-gateway/internal/csiv0"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TestRenamesNameRealFields: every entry of renames names a v1 message, a field it has and a
// field its v0 counterpart has, of a type that can cross, so that a misspelt name cannot
// silently leave a field behind.
func TestRenamesNameRealFields(t *testing.T) {
	for msg, fields := range renames {
		v1, err1 := protoregistry.GlobalTypes.FindMessageByName(v1Package.Append(msg))
		v0, err0 := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("csi.v0").Append(msg))
		if err1 != nil || err0 != nil {
			t.Errorf("renames[%s]: no such message in both versions (%v, %v)", msg, err1, err0)
			continue
		}
		for v1Field, v0Field := range fields {
			a := v1.Descriptor().Fields().ByName(v1Field)
			b := v0.Descriptor().Fields().ByName(v0Field)
			switch {
			case a == nil || b == nil:
				t.Errorf("renames[%s]: %s → %s names a field that does not exist", msg, v1Field, v0Field)
			case !sameType(a, b):
				t.Errorf("renames[%s]: %s and %s have different types: the value cannot cross", msg, v1Field, v0Field)
			}
		}
	}
}

// TestVersionsDocNamesEveryRename keeps docs/versions.md's table of fields in step with
// renames: every v0 field renames gives a v1 field is named there, beside its v1 name.
func TestVersionsDocNamesEveryRename(t *testing.T) {
	fields := versionsDocSection(t, "### Fields")
	for msg, renamed := range renames {
		for v1Field, v0Field := range renamed {
			found := false
			for _, row := range strings.Split(fields, "\n") {
				cells := strings.Split(row, "|")
				if len(cells) > 2 && strings.Contains(cells[1], string(v1Field)+"`") && strings.Contains(cells[2], string(v0Field)+"`") {
					found = true
				}
			}
			if !found {
				t.Errorf("docs/versions.md's fields table has no row for %s.%s → %s", msg, v1Field, v0Field)
			}
		}
	}
}

// BenchmarkCrossCreateVolume: the fields of a v1 CreateVolumeRequest crossing to v0, the
// per-call cost of the reflection (its field pairs are worked out once per message pair).
func BenchmarkCrossCreateVolume(b *testing.B) {
	req := &csi.CreateVolumeRequest{
		Name:          "pvc-0123",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		Parameters:    map[string]string{"pool": "gold"},
		Secrets:       map[string]string{"password": "canary"},
	}
	b.ReportAllocs()
	for b.Loop() {
		crossed[*csiv0.CreateVolumeRequest](req)
	}
}
