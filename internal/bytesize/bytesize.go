package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units are the units Parse accepts: binary (Ki, Mi, ...) and decimal (K, M, ...). The binary
// ones come first: Format picks the largest that divides a size.
var units = []struct {
	suffix string
	bytes  int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15},
}

// Parse reads a positive byte count: plain bytes, or a whole number with a unit, the unit
// optionally followed by B.
func Parse(s string) (int64, error) {
	num, unit := s, int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(strings.TrimSuffix(s, "B"), u.suffix); ok {
			num, unit = rest, u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("want a positive whole number of bytes, optionally with a unit: 16KiB, 512Mi, 1Gi, 10G")
	}
	return n * unit, nil
}

// Format writes n with the largest binary unit that divides it (1Ti, 1536Mi), or as bytes;
// Parse reads it back.
func Format(n int64) string {
	for i := 4; i >= 0; i-- { // Pi down to Ki
		if u := units[i]; n != 0 && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Size is a size key of the configuration: a YAML number is bytes, a string is read by
// Parse ("1Ti", "500Gi", "16KiB").
type Size int64

// UnmarshalText parses a size written as a string.
func (s *Size) UnmarshalText(text []byte) error {
	n, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// Size32 is a Size that fits 32 bits, for the limits HTTP/2 announces in 32-bit settings.
type Size32 uint32

// UnmarshalText parses a size written as a string, at most 4294967295 bytes (4Gi - 1).
func (s *Size32) UnmarshalText(text []byte) error {
	var n Size
	if err := n.UnmarshalText(text); err != nil {
		return err
	}
	if n > math.MaxUint32 {
		return fmt.Errorf("%s is %d bytes; at most 4294967295 (4Gi - 1)", text, n)
	}
	*s = Size32(n)
	return nil
}
