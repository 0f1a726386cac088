package csispec

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestValidateTopologyKeys(t *testing.T) {
	for key, want := range map[string]string{
		"zone":                           "",
		"topology.kubernetes.io/zone":    "",
		"example.com/rack_1.a-b":         "",
		"a/b":                            "",
		"":                               "has a name that is not",
		"/zone":                          "has a prefix that is not",
		"example.com/":                   "has a name that is not",
		"Example.com/zone":               "has a prefix that is not",
		"example_com/zone":               "has a prefix that is not",
		"-example.com/zone":              "has a prefix that is not",
		"example.com/-zone":              "has a name that is not",
		"example.com/zone.":              "has a name that is not",
		"example.com/zo ne":              "has a name that is not",
		"a/b/c":                          "has a name that is not",
		strings.Repeat("p", 63) + "/z":   "",
		strings.Repeat("p", 64) + "/z":   "has a prefix that is not",
		"p/" + strings.Repeat("n", 63):   "",
		"p/" + strings.Repeat("n", 64):   "has a name that is not",
		"zöne":                           "has a name that is not",
		"example.com/ZONE":               "",
		"1.example.com/2":                "",
		"example.com/zone\x00":           "has a name that is not",
		strings.Repeat("x", 63):          "",
		strings.Repeat("x", 64):          "has a name that is not",
		"example.com/" + "z" + "_" + "z": "",
	} {
		got := topologyKeyProblem(key)
		if (want == "") != (got == "") || !strings.HasPrefix(got, want) {
			t.Errorf("topologyKeyProblem(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestValidateTopologyKeyCase checks that keys differing only in case are reported once, at
// the later key in sorted order, wherever the upper-case key sorts.
func TestValidateTopologyKeyCase(t *testing.T) {
	for _, tc := range []struct {
		kv   []string
		want []string
	}{
		{[]string{"zone", "a", "rack", "b"}, nil},
		{[]string{"zone", "a", "Zone", "b"}, []string{`segments: keys "zone" and another differ only in case`}},
		{[]string{"b", "x", "B", "y", "a", "z"}, []string{`segments: keys "b" and another differ only in case`}},
		{[]string{"x.io/Rack", "r", "x.io/rack", "s", "x.io/RACK", "t"}, []string{
			`segments: keys "x.io/Rack" and another differ only in case`,
			`segments: keys "x.io/rack" and another differ only in case`}},
	} {
		c := newChecker(requestSide)
		c.check(topology(tc.kv...).ProtoReflect())
		var got []string
		for _, v := range c.out {
			got = append(got, v.Msg)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%v: violations %q, want %q", tc.kv, got, tc.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tc.want[i]) {
				t.Errorf("%v: violation %q, want %q...", tc.kv, got[i], tc.want[i])
			}
		}
	}
}

func TestValidateTopologyValues(t *testing.T) {
	for value, want := range map[string]bool{
		"us-east-1a": true, "Z1": true, "a_b.c-d": true, "1": true,
		"": false, "-a": false, "a-": false, "a b": false, "a/b": false, strings.Repeat("v", 64): false,
	} {
		if got := isTopologyWord(value, true); got != want {
			t.Errorf("isTopologyWord(%q) = %v, want %v", value, got, want)
		}
	}
}

func TestValidatePluginNames(t *testing.T) {
	for name, want := range map[string]bool{
		"csi.example.com": true, "Example-CSI.com": true, "a": true, "hostpath.csi.k8s.io": true,
		strings.Repeat("a", 63): true,
		strings.Repeat("a", 64): false, "csi_example.com": false, ".csi": false, "csi-": false, "csi example": false, "": false,
	} {
		if got := isDNSName(name, false); got != want {
			t.Errorf("isDNSName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestValidateBannedRunes(t *testing.T) {
	banned := []rune{0x00, 0x01, 0x08, 0x0B, 0x0C, 0x0E, 0x1F, 0x7F, 0x80, 0x9F}
	allowed := []rune{0x09, 0x0A, 0x0D, 0x20, 0x7E, 0xA0, 'é', 'ボ', 0x2028}
	for _, r := range banned {
		if got, ok := bannedRune("pvc-" + string(r) + "-x"); !ok || got != r {
			t.Errorf("bannedRune(U+%04X) = U+%04X, %v; want banned", r, got, ok)
		}
	}
	for _, r := range allowed {
		if got, ok := bannedRune("pvc-" + string(r)); ok {
			t.Errorf("bannedRune(U+%04X) = U+%04X; want allowed", r, got)
		}
	}
}

func TestValidateSecretKeys(t *testing.T) {
	for key, want := range map[string]bool{
		"username": true, "csi.storage.k8s.io_key-1": true, "A": true,
		"": false, "a/b": false, "a b": false, "key=": false, "ключ": false,
	} {
		if got := isSecretKey(key); got != want {
			t.Errorf("isSecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// topology is a Topology of the segments kv (key, value, key, value, ...).
func topology(kv ...string) *csi.Topology {
	t := &csi.Topology{Segments: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Segments[kv[i]] = kv[i+1]
	}
	return t
}
