package redact

import (
	"encoding/base64"
	"net/url"
	"testing"
)

func TestScrub(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{"no values", nil, "backend said " + canary, "backend said " + canary},
		{"empty input", []string{canary}, "", ""},
		{"no occurrence", []string{canary}, "volume vol-1 not found", "volume vol-1 not found"},
		{"one occurrence", []string{canary}, "login failed for " + canary + ": denied", "login failed for ***: denied"},
		{"every occurrence", []string{canary}, canary + "/" + canary + canary, "***/***"},
		{"whole input", []string{canary}, canary, "***"},
		{"short values are kept", []string{"abc", "rw", ""}, "abc rw mounted", "abc rw mounted"},
		{"four bytes are scrubbed", []string{"s3cr"}, "key s3cr", "key ***"},
		{"secret containing another", []string{"pass", "password123"}, "pw=password123 p=pass", "pw=*** p=***"},
		{"overlapping secrets", []string{"abcdef", "defghi"}, "x abcdefghi y", "x *** y"},
		{"overlap where the later one is longer", []string{"zzab", "abcdXYZ"}, "zzabcdXYZ!", "***!"},
		{"adjacent secrets", []string{"aaaa", "bbbb"}, "aaaabbbb", "***"},
		{"base64 std", []string{"p@ss>word?"}, "auth=" + base64.StdEncoding.EncodeToString([]byte("p@ss>word?")), "auth=***"},
		{"base64 url", []string{"p@ss>word?"}, "auth=" + base64.URLEncoding.EncodeToString([]byte("p@ss>word?")), "auth=***"},
		{"base64 raw", []string{"hunter2!"}, base64.RawStdEncoding.EncodeToString([]byte("hunter2!")), "***"},
		{"query escaped", []string{"p@ss w/rd"}, "GET /login?pw=" + url.QueryEscape("p@ss w/rd") + "&x=1", "GET /login?pw=***&x=1"},
		{"path escaped", []string{"p@ss w/rd"}, "/v1/" + url.PathEscape("p@ss w/rd") + "/x", "/v1/***/x"},
		{"json escaped", []string{`pa"ss\word`}, `{"error":"bad password \"pa\"ss\\word\""}`, `{"error":"bad password \"***\""}`},
		{"json html escaped", []string{"a<b>&c"}, `{"e":"a\u003cb\u003e\u0026c"}`, `{"e":"***"}`},
		{"unicode", []string{"pässwört"}, "pw: pässwört.", "pw: ***."},
		{"json escaped line separator", []string{"pass\u2028word"}, `{"e":"pass\u2028word"}`, `{"e":"***"}`},
		{"json escaped invalid utf-8", []string{"pass\xffword"}, `{"e":"pass\ufffdword"}`, `{"e":"***"}`},
		{"replacement forms a new occurrence", []string{"x***", "yyyy"}, "xyyyy", "***"},
		{"secret of stars", []string{"****"}, "a********b", "a***b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewScrubber(tt.values).Scrub(tt.in); got != tt.want {
				t.Errorf("Scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestScrubNilScrubber(t *testing.T) {
	var sc *Scrubber
	if got := sc.Scrub(canary); got != canary {
		t.Errorf("nil Scrubber changed its input: %q", got)
	}
}

func TestScrubDoesNotAllocateWithoutMatch(t *testing.T) {
	msg := "rpc error: volume vol-1 is still attached to node node-1; detach it first"
	for name, sc := range map[string]*Scrubber{
		"nil":          nil,
		"no values":    NewScrubber(nil),
		"short values": NewScrubber([]string{"ab"}),
		"no match":     NewScrubber([]string{canary, "hunter2", "p@ss w/rd"}),
	} {
		if n := testing.AllocsPerRun(100, func() { _ = sc.Scrub(msg) }); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}
