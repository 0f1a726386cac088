package tenancy

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FuzzScopeID checks the scoping of IDs (and names) for arbitrary tenants and strings:
// UnscopeID never panics; for a valid tenant, ScopeID then UnscopeID gives the ID back; an ID
// scoped for one tenant never unscopes for another; and two tenants' scoped names never meet.
func FuzzScopeID(f *testing.F) {
	for _, seed := range []struct{ a, b, id string }{
		{"blue", "green", "vol-1"},
		{"a", "a-b", "x"},          // a tenant's name is a prefix of another's
		{"a-b", "a", "b.x"},        // and the ID makes "a-b.x" look like a's
		{"a", "ab", ".x"},          // an ID that starts with the separator
		{"blue", "blue", "vol-1"},  // the same tenant
		{"blue", "green", ""},      // empty
		{"blue", "green", "."},     // only the separator
		{"blue", "green", "blue."}, // looks scoped already
		{"blue", "green", "green.vol-1"},
		{"0", "1", strings.Repeat("x", MaxLength-2)},      // exactly 128 bytes scoped
		{"0", "1", strings.Repeat("x", MaxLength-1)},      // one byte too many
		{strings.Repeat("t", 32), "t", "vol"},             // the longest tenant name
		{"Blue", "blue", "vol"},                           // invalid: upper case
		{"a.b", "a", "b.vol"},                             // invalid: the separator
		{"-a", "a", "vol"},                                // invalid: leading '-'
		{"", "a", ".vol"},                                 // invalid: empty
		{"blue", "green", "\xff\xfe"},                     // not UTF-8
		{"blue", "green", "日本語"},                          // multi-byte
		{"blue", "green", strings.Repeat("é", MaxLength)}, // long multi-byte, over the limit
	} {
		f.Add(seed.a, seed.b, seed.id)
	}
	f.Fuzz(func(t *testing.T, a, b, id string) {
		// Whatever the input, UnscopeID answers.
		if got, ok := UnscopeID(a, id); ok && (got == "" || a+Separator+got != id) {
			t.Fatalf("UnscopeID(%q, %q) = %q, true", a, id, got)
		}
		if ValidTenantName(a) != nil {
			return
		}
		if strings.Contains(a, Separator) || len(a) > 32 || a == "" {
			t.Fatalf("ValidTenantName accepts %q", a)
		}

		scoped, err := ScopeID(a, id)
		switch {
		case len(a)+len(Separator)+len(id) > MaxLength:
			if status.Code(err) != codes.Internal {
				t.Fatalf("ScopeID(%q, %d bytes) = %q, %v; want INTERNAL", a, len(id), scoped, err)
			}
		case err != nil:
			t.Fatalf("ScopeID(%q, %q): %v", a, id, err)
		default:
			if len(scoped) > MaxLength || !strings.HasPrefix(scoped, a+Separator) {
				t.Fatalf("ScopeID(%q, %q) = %q", a, id, scoped)
			}
			back, ok := UnscopeID(a, scoped)
			if id != "" && (!ok || back != id) {
				t.Fatalf("UnscopeID(%q, ScopeID(%q, %q) = %q) = %q, %t", a, a, id, scoped, back, ok)
			}
			if id == "" && ok {
				t.Fatalf("UnscopeID(%q, %q) accepts the bare prefix", a, scoped)
			}
			if ValidTenantName(b) == nil && b != a {
				if got, ok := UnscopeID(b, scoped); ok {
					t.Fatalf("%q, scoped for %q, unscopes for %q as %q", scoped, a, b, got)
				}
			}
		}

		// Names: within the limit, in the tenant's prefix, stable, and never another tenant's.
		if len(id) > MaxLength {
			if _, err := ScopeName(a, id); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("ScopeName(%q, %d bytes): %v; want INVALID_ARGUMENT", a, len(id), err)
			}
			return
		}
		name, err := ScopeName(a, id)
		if err != nil {
			t.Fatalf("ScopeName(%q, %q): %v", a, id, err)
		}
		if len(name) > MaxLength || !strings.HasPrefix(name, a+Separator) {
			t.Fatalf("ScopeName(%q, %q) = %q", a, id, name)
		}
		if utf8.ValidString(id) && !utf8.ValidString(name) {
			t.Fatalf("ScopeName(%q, %q) = %q is not valid UTF-8", a, id, name)
		}
		if again, _ := ScopeName(a, id); again != name {
			t.Fatalf("ScopeName(%q, %q) is not stable: %q, %q", a, id, name, again)
		}
		if len(a)+len(Separator)+len(id) <= MaxLength && name != a+Separator+id {
			t.Fatalf("ScopeName(%q, %q) = %q; a name that fits is only prefixed", a, id, name)
		}
		if ValidTenantName(b) == nil && b != a {
			if other, err := ScopeName(b, id); err == nil && other == name {
				t.Fatalf("tenants %q and %q share the scoped name %q", a, b, name)
			}
		}
	})
}
