package main

import (
	"github.com/spf13/pflag"

	"github.com/csi-gateway/csi-gateway/internal/bytesize"
)

// sizeFlag is a byte count flag that takes units (1Ti, 500Gi, 10G; bytesize.Parse) and shows its default
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
	return bytesize.Format(*f.n)
}

func (f sizeFlag) Set(s string) error {
	n, err := bytesize.Parse(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

func (sizeFlag) Type() string { return "size" }
