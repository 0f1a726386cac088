package tenancy

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
)

func TestScopeName(t *testing.T) {
	got, err := ScopeName("blue", "pvc-1")
	if err != nil || got != "blue.pvc-1" {
		t.Fatalf(`ScopeName("blue", "pvc-1") = %q, %v; want "blue.pvc-1"`, got, err)
	}

	// "blue." is 5 bytes: names of up to 123 bytes are only prefixed.
	fits := strings.Repeat("n", MaxLength-len("blue."))
	got, err = ScopeName("blue", fits)
	if err != nil || got != "blue."+fits {
		t.Fatalf("a name that scopes to exactly %d bytes: got %q (%d bytes), %v", MaxLength, got, len(got), err)
	}

	// A name over CSI's limit itself is the caller's mistake.
	_, err = ScopeName("blue", strings.Repeat("n", MaxLength+1))
	wantCode(t, err, codes.InvalidArgument, "129 bytes", "limit of 128")
	// Exactly 128 bytes is a valid CSI name, whatever the tenant.
	for _, tenant := range []string{"a", "blue", strings.Repeat("t", 32)} {
		if _, err := ScopeName(tenant, strings.Repeat("n", MaxLength)); err != nil {
			t.Errorf("a 128-byte name of tenant %s: %v", tenant, err)
		}
	}
}

func TestScopeNameLong(t *testing.T) {
	long32 := strings.Repeat("t", 32)
	names := []string{
		strings.Repeat("n", MaxLength-len("blue.")+1), // one byte too many
		strings.Repeat("n", MaxLength),
		strings.Repeat("n", MaxLength-1) + "x",                  // differs from the one above only at the end
		strings.Repeat("n", 90) + "é" + strings.Repeat("n", 30), // a 2-byte rune near the cut
		strings.Repeat("日本語", 14),                               // 126 bytes of 3-byte runes
		strings.Repeat("\U0001F600", 32),                        // 128 bytes of 4-byte runes
	}
	for _, tenant := range []string{"a", "blue", long32} {
		seen := map[string]string{}
		for _, name := range names {
			if len(prefix(tenant))+len(name) <= MaxLength {
				continue
			}
			got, err := ScopeName(tenant, name)
			if err != nil {
				t.Fatalf("ScopeName(%s, %d bytes): %v", tenant, len(name), err)
			}
			if len(got) > MaxLength {
				t.Errorf("ScopeName(%s, %d bytes) = %d bytes, over %d", tenant, len(name), len(got), MaxLength)
			}
			if !utf8.ValidString(got) {
				t.Errorf("ScopeName(%s, %q) = %q: not valid UTF-8", tenant, name, got)
			}
			if !strings.HasPrefix(got, prefix(tenant)) {
				t.Errorf("ScopeName(%s, ...) = %q lacks the tenant's prefix", tenant, got)
			}
			// It keeps the name's beginning, readable.
			body := strings.TrimPrefix(got, prefix(tenant))
			cut := strings.LastIndex(body, "-")
			if cut < 0 || !strings.HasPrefix(name, body[:cut]) || cut < MaxLength/3 {
				t.Errorf("ScopeName(%s, %q) = %q does not keep the name's beginning", tenant, name, got)
			}
			// Stable.
			if again, _ := ScopeName(tenant, name); again != got {
				t.Errorf("ScopeName(%s, ...) is not stable: %q, then %q", tenant, got, again)
			}
			// Distinct.
			if other, dup := seen[got]; dup {
				t.Errorf("ScopeName(%s, ...) gives %q for two names: %q and %q", tenant, got, other, name)
			}
			seen[got] = name
		}
	}
	// Two tenants' scoped names never meet, long or not.
	a, _ := ScopeName("a", names[1])
	b, _ := ScopeName("a-b", names[1])
	if a == b || strings.HasPrefix(b, "a.") {
		t.Errorf("tenants a and a-b share a scoped name: %q, %q", a, b)
	}
}

func TestScopeIDRoundTrip(t *testing.T) {
	for _, tc := range []struct{ tenant, id string }{
		{"blue", "vol-1"},
		{"blue", "a.b.c"},      // backend IDs may hold the separator
		{"blue", "blue.vol-1"}, // or look like a scoped ID themselves
		{"a", "."},             // a lone separator
		{"a-b", "x"},
		{"0", strings.Repeat("x", MaxLength-2)},
	} {
		scoped, err := ScopeID(tc.tenant, tc.id)
		if err != nil {
			t.Fatalf("ScopeID(%q, %q): %v", tc.tenant, tc.id, err)
		}
		if scoped != tc.tenant+"."+tc.id {
			t.Errorf("ScopeID(%q, %q) = %q", tc.tenant, tc.id, scoped)
		}
		back, ok := UnscopeID(tc.tenant, scoped)
		if !ok || back != tc.id {
			t.Errorf("UnscopeID(%q, %q) = %q, %t; want %q", tc.tenant, scoped, back, ok, tc.id)
		}
	}

	// A backend ID that leaves no room for the prefix is the backend's fault: INTERNAL.
	_, err := ScopeID("blue", strings.Repeat("x", MaxLength-len("blue.")+1))
	wantCode(t, err, codes.Internal, "124 bytes", "within 123 bytes")
	if _, err := ScopeID("blue", strings.Repeat("x", MaxLength-len("blue."))); err != nil {
		t.Errorf("a backend ID that scopes to exactly %d bytes: %v", MaxLength, err)
	}
}

func TestUnscopeIDRefuses(t *testing.T) {
	for _, tc := range []struct{ tenant, id string }{
		{"blue", "green.vol-1"},  // another tenant's
		{"blue", "vol-1"},        // a bare backend ID
		{"blue", "blue."},        // the bare prefix
		{"blue", "blue"},         // the tenant's name alone
		{"blue", ""},             // nothing
		{"blue", "BLUE.vol-1"},   // prefixes are case-sensitive
		{"blue", "blue-x.vol-1"}, // a tenant whose name starts with "blue"
		{"blue", "bluegreen.v"},  // likewise, without the '-'
		{"a", "a-b.x"},           // "a" is a prefix of "a-b"
		{"a-b", "a.x"},           // and the other way round
		{"a", "ab.x"},            //
		{"blue", " blue.vol-1"},  // leading space
	} {
		if got, ok := UnscopeID(tc.tenant, tc.id); ok {
			t.Errorf("UnscopeID(%q, %q) = %q, true; want refused", tc.tenant, tc.id, got)
		}
	}
	// "blue..vol" is blue's ID of the backend ID ".vol": that one is blue's.
	if got, ok := UnscopeID("blue", "blue..vol"); !ok || got != ".vol" {
		t.Errorf(`UnscopeID("blue", "blue..vol") = %q, %t; want ".vol"`, got, ok)
	}
}

func TestValidTenantName(t *testing.T) {
	good := []string{
		"a", "0", "blue", "green", "a-b", "team-42", "a1", "1a",
		strings.Repeat("x", 32), "a" + strings.Repeat("-", 30) + "b",
	}
	for _, name := range good {
		if err := ValidTenantName(name); err != nil {
			t.Errorf("ValidTenantName(%q): %v", name, err)
		}
	}
	bad := []string{
		"",                     // empty
		"Blue", "BLUE", "bLue", // upper case
		"a.b", ".", "blue.", // the separator
		strings.Repeat("x", 33), // too long
		"-a", "a-", "-",         // leading or trailing '-'
		"a_b", "a b", " a", "a\n", "a/b", "a:b", "é", "a\x00",
	}
	for _, name := range bad {
		err := ValidTenantName(name)
		if err == nil {
			t.Errorf("ValidTenantName(%q) accepted it", name)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(name)) || !strings.Contains(err.Error(), "1 to 32") {
			t.Errorf("ValidTenantName(%q): message %q names neither the name nor the rule", name, err)
		}
	}
}
