package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// sizeUnits are the units parseSize accepts: binary (Ki, Mi, ...) and decimal (K, M, ...).
// The binary ones come first: formatSize picks the largest that divides a size.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15},
}

// parseSize reads a positive byte count: plain bytes, or a whole number with a unit.
func parseSize(s string) (int64, error) {
	num, unit := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, unit = strings.TrimSuffix(s, u.suffix), u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("want a positive whole number of bytes, optionally with a unit: 512Mi, 1Gi, 10G")
	}
	return n * unit, nil
}

// formatSize writes n with the largest binary unit that divides it (1Ti, 1536Mi), or as
// bytes; parseSize reads it back.
func formatSize(n int64) string {
	for i := 4; i >= 0; i-- { // Pi down to Ki
		if u := sizeUnits[i]; n != 0 && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// sizeFlag is a byte count flag that takes units (1Ti, 500Gi, 10G) and shows its default
// with one.
type sizeFlag struct{ n *int64 }

var _ pflag.Value = sizeFlag{}

// sizeVar defines a size flag on fs that sets *n, whose current value is the default.
func sizeVar(fs *pflag.FlagSet, n *int64, name, usage string) {
	fs.Var(sizeFlag{n}, name, usage)
}

func (f sizeFlag) String() string {
	if f.n == nil {
		return "0"
	}
	return formatSize(*f.n)
}

func (f sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

func (sizeFlag) Type() string { return "size" }
