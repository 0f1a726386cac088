package choice

import "testing"

type mode string

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"", "b", ""},
		{"  A ", "a", ""},
		{"C", "c", ""},
		{"d", "", `unknown mode "d"; use a, b or c`},
	} {
		got, err := Parse(tc.in, "mode", mode("b"), "a", "b", "c")
		if string(got) != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("Parse(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSetKeepsValueOnError(t *testing.T) {
	m := mode("b")
	parse := func(s string) (mode, error) { return Parse(s, "mode", mode("b"), "a", "b") }
	if err := Set(&m, []byte("x"), parse); err == nil || m != "b" {
		t.Fatalf("Set(x) = %v, m = %q; want an error and m unchanged", err, m)
	}
	if err := Set(&m, []byte("a"), parse); err != nil || m != "a" {
		t.Fatalf("Set(a) = %v, m = %q; want a", err, m)
	}
}
