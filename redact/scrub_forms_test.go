package redact

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/csi-gateway/csi-gateway/backends"
)

// reformattedSecrets are secret values whose bytes change on their way through a backend:
// what Kubernetes Secrets made from files hold (a trailing newline, a CRLF), a tab, a PEM
// key, and a value of exactly minFragmentLen bytes.
var reformattedSecrets = []string{
	"hunter2hunter2\n",
	"Zq8#w1Lk-crlf\r\n",
	"tab9Rk2\tafter7Wq",
	"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dV\n-----END PRIVATE KEY-----\n",
	"8bYt#2qZ",
}

// echoes are the ways a backend repeats a secret in its error message, as the gateway then
// receives them (after a rest backend has flattened the appliance's words, when it does).
var echoes = map[string]func(v string) string{
	"raw":             func(v string) string { return v },
	"flattened":       backends.OneLine,
	"trimmed":         strings.TrimSpace,
	"json escaped":    func(v string) string { b, _ := json.Marshal(v); return string(b[1 : len(b)-1]) },
	"line by line":    func(v string) string { return strings.Join(trimmedLines(v), " | ") },
	"flattened lines": func(v string) string { return backends.OneLine(strings.Join(trimmedLines(v), "\n")) },
}

func trimmedLines(v string) []string {
	var out []string
	for _, l := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// secretFragments returns every minFragmentLen-byte substring of v and of the forms it takes
// once reformatted (flattened, each line, JSON-escaped): a longer fragment contains one of
// them, so text holding none of them holds no fragment of v of minFragmentLen bytes or more.
func secretFragments(v string) []string {
	b, _ := json.Marshal(v)
	forms := append([]string{v, backends.OneLine(v), string(b[1 : len(b)-1])}, trimmedLines(v)...)
	var out []string
	for _, f := range forms {
		for i := 0; i+minFragmentLen <= len(f); i++ {
			out = append(out, f[i:i+minFragmentLen])
		}
	}
	return out
}

func TestScrubReformattedSecrets(t *testing.T) {
	sc := NewScrubber(reformattedSecrets)
	for name, echo := range echoes {
		for _, v := range reformattedSecrets {
			for _, flatten := range []bool{false, true} {
				text := "login with password=" + echo(v) + " refused (permission_denied)"
				if flatten { // a rest backend cleans the appliance's whole message
					text = backends.OneLine(text)
				}
				got := sc.Scrub(text)
				for _, f := range secretFragments(v) {
					if strings.Contains(got, f) {
						t.Errorf("%s, flattened %v, %q: the scrubbed text %q holds %q", name, flatten, v, got, f)
						break
					}
				}
				if !strings.HasPrefix(got, "login with password=") || !strings.HasSuffix(got, " refused (permission_denied)") {
					t.Errorf("%s, flattened %v, %q: the scrubbed text %q lost the words around the secret", name, flatten, v, got)
				}
			}
		}
	}
}

func TestScrubFragmentBounds(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{"trailing newline, flattened", []string{"hunter2hunter2\n"}, "password=hunter2hunter2 (HTTP 403)", "password=*** (HTTP 403)"},
		{"a short whole value, trimmed", []string{"abcde\n"}, "pw abcde.", "pw ***."},
		{"a short value's line is not a fragment", []string{"abcdefghij\nxyz"}, "a xyz b abcdefghij", "a xyz b ***"},
		{"lines of 8 bytes are", []string{"abcdefgh\nijklmnop\nq"}, "ijklmnop, abcdefgh", "***, ***"},
		{"words of 8 bytes are", []string{"word5 eightbyt ninebytes"}, "eightbyt word5 ninebytes", "*** word5 ***"},
		{"the PEM header is over-redacted", []string{"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n-----END PRIVATE KEY-----"},
			"bad -----BEGIN PRIVATE KEY----- header", "bad *** header"},
		{"one plain word has no other forms", []string{"8bYt#2qZ"}, "x 8bYt#2q", "x 8bYt#2q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewScrubber(tt.values).Scrub(tt.in); got != tt.want {
				t.Errorf("Scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDerivedFormsOfPlainValue(t *testing.T) {
	for _, v := range []string{canary, "8bYt#2qZ", "p@ss>word?"} {
		if d := derivedForms(v); d != nil {
			t.Errorf("derivedForms(%q) = %q, want none", v, d)
		}
	}
}
