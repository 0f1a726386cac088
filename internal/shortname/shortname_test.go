package shortname

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFit(t *testing.T) {
	lower := func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' }
	long := strings.Repeat("a", 200)
	for _, tc := range []struct {
		name    string
		max     int
		allowed func(rune) bool
		kept    bool
	}{
		{"pvc-1", 128, nil, true},
		{strings.Repeat("x", 128), 128, nil, true},
		{strings.Repeat("x", 129), 128, nil, false},
		{long, 48, lower, false},
		{"has_underscore", 48, lower, false},
		{strings.Repeat("é", 40), 48, nil, false},
	} {
		got := Fit(tc.name, tc.max, tc.allowed)
		if (got == tc.name) != tc.kept || len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("Fit(%.20q…, %d) = %q: kept %v, want %v; at most %d bytes, valid UTF-8", tc.name, tc.max, got, got == tc.name, tc.kept, tc.max)
		}
		if tc.allowed != nil && strings.IndexFunc(got, func(r rune) bool { return !tc.allowed(r) }) >= 0 {
			t.Errorf("Fit(%q) = %q has characters not allowed", tc.name, got)
		}
		if again := Fit(tc.name, tc.max, tc.allowed); again != got {
			t.Errorf("Fit is not stable: %q, then %q", got, again)
		}
	}
	if a, b := Fit(long+"1", 48, nil), Fit(long+"2", 48, nil); a == b {
		t.Errorf("two names share a short form: %q", a)
	}
}
