package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// version is the release version, set by `make build` with -ldflags "-X main.version=...".
// Empty: the module's version from the build info, else "dev".
var version string

// buildInfo is what `csi-gateway version` and `--version` print, what GetPluginInfo of the
// embedded appliance reports (Version) and the service.version of the spans.
type buildInfo struct {
	Version   string // -X main.version, else the module version (a tag or pseudo-version), else dev
	Revision  string // vcs.revision: the full commit hash, or "" when built outside a checkout
	Time      string // vcs.time: the commit's date (RFC 3339, UTC)
	Dirty     bool   // vcs.modified: built from a checkout with uncommitted changes (printed only with a Revision)
	GoVersion string // the toolchain that built the binary
	Platform  string // GOOS/GOARCH
}

// readBuildInfo reads the binary's build info, with stamped (main.version) winning over the
// module's version. `go build` in a git checkout records the vcs.* settings; `go install
// module@version` records the module version; `go run` and test binaries record neither.
func readBuildInfo(stamped string) buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return newBuildInfo(stamped, bi)
}

// newBuildInfo is readBuildInfo from bi (nil: the binary has none).
func newBuildInfo(stamped string, bi *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: stamped, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return b.withDefaultVersion()
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	if b.Version == "" && bi.Main.Version != "(devel)" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Dirty = s.Value == "true"
		}
	}
	return b.withDefaultVersion()
}

func (b buildInfo) withDefaultVersion() buildInfo {
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
}

// String is the text of `csi-gateway version`: the version on the first line (what scripts
// read, as before), then one "key: value" line per fact; unknown facts say "unknown".
func (b buildInfo) String() string {
	or := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	var s strings.Builder
	fmt.Fprintf(&s, "csi-gateway %s\n", b.Version)
	fmt.Fprintf(&s, "commit: %s\n", or(b.Revision))
	fmt.Fprintf(&s, "date: %s\n", or(b.Time))
	dirty := "unknown" // no vcs.* settings, so no vcs.modified either
	if b.Revision != "" {
		dirty = strconv.FormatBool(b.Dirty)
	}
	fmt.Fprintf(&s, "dirty: %s\n", dirty)
	fmt.Fprintf(&s, "go: %s %s\n", b.GoVersion, b.Platform)
	return s.String()
}

// addVersion gives root its --version flag and its version subcommand, which print the same.
func addVersion(root *cobra.Command, info buildInfo) {
	root.Version = info.Version
	root.SetVersionTemplate(info.String())
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, commit date, dirty state and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), info)
			return err
		},
	})
}

// buildVersion is buildInfo's Version for this binary.
func buildVersion() string { return readBuildInfo(version).Version }

// gatewayUserAgent is the user-agent of the gateway's own calls to a driver (readiness probes,
// capability fetches): "csi-gateway/<version>", which the transport's token follows.
func gatewayUserAgent() string { return "csi-gateway/" + buildVersion() }
