package main

import (
	"bytes"
	"context"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestNewBuildInfo(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-26T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name, stamped string
		bi            *debug.BuildInfo
		want          string
	}{
		{"no build info", "", nil,
			"csi-gateway dev\ncommit: unknown\ndate: unknown\ndirty: unknown\ngo: " + runtime.Version() + " " + platform + "\n"},
		{"go run or go test: (devel), no vcs", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"csi-gateway dev\ncommit: unknown\ndate: unknown\ndirty: unknown\ngo: go1.26.0 " + platform + "\n"},
		{"go install module@version", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}},
			"csi-gateway v1.2.3\ncommit: unknown\ndate: unknown\ndirty: unknown\ngo: go1.26.0 " + platform + "\n"},
		{"go build in a dirty checkout", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.4-0.20261126100000-0123456789ab+dirty"}, Settings: vcs},
			"csi-gateway v1.2.4-0.20261126100000-0123456789ab+dirty\ncommit: 0123456789abcdef0123456789abcdef01234567\ndate: 2026-11-26T10:00:00Z\ndirty: true\ngo: go1.26.0 " + platform + "\n"},
		{"make build: the stamped version wins", "v1.3.0-rc.1", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs},
			"csi-gateway v1.3.0-rc.1\ncommit: 0123456789abcdef0123456789abcdef01234567\ndate: 2026-11-26T10:00:00Z\ndirty: true\ngo: go1.26.0 " + platform + "\n"},
	} {
		if got := newBuildInfo(tc.stamped, tc.bi).String(); got != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestVersionFlagAndCommand: --version and version print the same build info.
func TestVersionFlagAndCommand(t *testing.T) {
	want := readBuildInfo(version).String()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("%v: %v (%s)", args, err, stderr.String())
		}
		if stdout.String() != want {
			t.Errorf("%v printed\n%s\nwant\n%s", args, stdout.String(), want)
		}
	}
}
