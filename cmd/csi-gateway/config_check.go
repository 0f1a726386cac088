package main

import (
	"fmt"
	"io"
	"strings"
)

// reportConfigCheck ends `serve --check-config`: with err nil it prints "configuration OK"
// and exits 0; otherwise it prints each problem on a line of its own and exits 1.
func reportConfigCheck(err error, stdout, stderr io.Writer) error {
	if err == nil {
		fmt.Fprintln(stdout, "configuration OK")
		return nil
	}
	for line := range strings.SplitSeq(err.Error(), "\n") {
		fmt.Fprintln(stderr, line)
	}
	return exitError{code: 1}
}
