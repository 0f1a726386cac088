package bytesize

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1", 1}, {"4096", 4096}, {"512Mi", 512 << 20}, {"1Gi", 1 << 30}, {"10G", 10_000_000_000},
		{"2k", 2000}, {"3Ti", 3 << 40}, {"1P", 1e15},
		{"16KiB", 16 << 10}, {"64Ki", 64 << 10}, {"10GB", 10_000_000_000}, {"2kB", 2000},
		{"", 0}, {"0", 0}, {"-1Gi", 0}, {"1.5Gi", 0}, {"Gi", 0}, {"1Gx", 0}, {"9000000Pi", 0},
		{"16B", 0}, {"KiB", 0}, {"1KiBB", 0}, {"1iB", 0},
	} {
		got, err := Parse(tc.in)
		if tc.want == 0 {
			if err == nil {
				t.Errorf("Parse(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// TestFormat: what Format writes, Parse reads back.
func TestFormat(t *testing.T) {
	for _, n := range []int64{1, 1000, 1 << 10, 1536 << 20, 1 << 40, 3 << 50, 1<<40 + 1} {
		if back, err := Parse(Format(n)); err != nil || back != n {
			t.Errorf("Parse(Format(%d) = %q) = %d, %v", n, Format(n), back, err)
		}
	}
}

func TestSize32(t *testing.T) {
	var s Size32
	if err := s.UnmarshalText([]byte("16KiB")); err != nil || s != 16<<10 {
		t.Errorf("16KiB: %d, %v", s, err)
	}
	if err := s.UnmarshalText([]byte("4Gi")); err == nil {
		t.Errorf("4Gi (2^32) was accepted as a 32-bit size: %d", s)
	}
	if err := s.UnmarshalText([]byte("4294967295")); err != nil || s != 1<<32-1 {
		t.Errorf("4294967295: %d, %v", s, err)
	}
}
