package proxy

import "testing"

// TestParseRepair: a grpc backend defaults to spec, the others to plugin; a setting written
// out wins, and an unknown one is refused naming the choices.
func TestParseRepair(t *testing.T) {
	for _, tc := range []struct {
		in, backendType string
		want            Repair
	}{
		{"", "grpc", RepairSpec},
		{"", "rest", RepairPlugin},
		{"", "embedded", RepairPlugin},
		{"none", "grpc", RepairNone},
		{"plugin", "grpc", RepairPlugin},
		{"spec", "rest", RepairSpec},
	} {
		if got, err := ParseRepair(tc.in, tc.backendType); err != nil || got != tc.want {
			t.Errorf("ParseRepair(%q, %q) = %q, %v; want %q", tc.in, tc.backendType, got, err, tc.want)
		}
	}
	if _, err := ParseRepair("always", "grpc"); err == nil {
		t.Error("ParseRepair accepted an unknown setting")
	}
}
