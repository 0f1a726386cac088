package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseFlagsDefaults(t *testing.T) {
	p, out, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if out != "" || p.rounds != 3 || !slices.Equal(p.concurrency, []int{1, 16, 64}) ||
		len(p.workloads) != len(workloads) || len(p.relays) != len(relaySpecs) || !p.install || !p.redaction || p.soak != 1000000 {
		t.Errorf("defaults: %+v, out %q", p, out)
	}
}

func TestParseFlagsRefusesNonsense(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-relays", "direct,envoy"}, `-relays: "envoy" is not one of`},
		{[]string{"-workloads", "Probe,DeleteVolume"}, `-workloads: "DeleteVolume" is not one of`},
		{[]string{"-concurrency", "1,0"}, `-concurrency: "0" is not a positive number`},
		{[]string{"-concurrency", ","}, "must not be empty"},
		{[]string{"-rounds", "0"}, "must be positive"},
		{[]string{"-soak", "-1"}, "-soak: -1 is negative"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		_, _, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
