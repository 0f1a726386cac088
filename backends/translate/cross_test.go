package translate

import (
	"testing"

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
