package tenancy

import (
	"bytes"
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

// FuzzOpenToken checks the listing tokens, which come from callers: whatever is handed in,
// open answers without panicking, and anything but a token sealed for the tenant and method
// is ABORTED; a backend token seals within CSI's 128 bytes (or is INTERNAL when it cannot)
// and opens to itself for its tenant and method only.
func FuzzOpenToken(f *testing.F) {
	tk, err := newTokens(bytes.Repeat([]byte{1}, TokenKeySize))
	if err != nil {
		f.Fatal(err)
	}
	const backendToken = "dm9sdW1lczo0Mg"
	sealed, err := tk.seal("blue", listVolumes, backendToken)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct{ tenant, method, backendToken, handedIn string }{
		{"blue", listVolumes, backendToken, sealed},
		{"green", listVolumes, backendToken, sealed},
		{"blue", listSnapshots, backendToken, sealed},
		{"blue", listVolumes, "", ""},
		{"blue", listVolumes, "x", "nonsense"},
		{"blue", listVolumes, "x", sealed[:len(sealed)-1]},
		{"blue", listVolumes, "x", sealed + "A"},
		{"blue", listVolumes, "x", strings.Repeat("A", 128)},
		{"blue", listVolumes, strings.Repeat("t", MaxBackendToken), "===="},
		{"blue", listVolumes, strings.Repeat("t", MaxBackendToken+1), "\xff"},
	} {
		f.Add(seed.tenant, seed.method, seed.backendToken, seed.handedIn)
	}
	f.Fuzz(func(t *testing.T, tenant, method, backend, handedIn string) {
		got, err := tk.open(tenant, method, handedIn)
		switch {
		case handedIn == "":
			if got != "" || err != nil {
				t.Fatalf("open of an empty token: %q, %v", got, err)
			}
		case err == nil && (tenant != "blue" || method != listVolumes || got != backendToken):
			// (The seed's sealed token differs in each fuzz worker: its nonce is random.)
			t.Fatalf("open(%q, %q, %q) accepted a token it never sealed: %q", tenant, method, handedIn, got)
		case err != nil && status.Code(err) != codes.Aborted:
			t.Fatalf("open(%q): %v, want ABORTED", handedIn, err)
		}

		s, err := tk.seal(tenant, method, backend)
		if len(backend) > MaxBackendToken {
			if status.Code(err) != codes.Internal {
				t.Fatalf("seal of a %d-byte token: %v, want INTERNAL", len(backend), err)
			}
			return
		}
		if err != nil || len(s) > MaxLength || (s == "") != (backend == "") {
			t.Fatalf("seal(%q) = %q (%d bytes), %v", backend, s, len(s), err)
		}
		if back, err := tk.open(tenant, method, s); err != nil || back != backend {
			t.Fatalf("open(seal(%q)) = %q, %v", backend, back, err)
		}
		if _, err := tk.open(tenant+"x", method, s); s != "" && err == nil {
			t.Fatalf("a token of tenant %q opened for %q", tenant, tenant+"x")
		}
	})
}
