// Command notices writes THIRD_PARTY_NOTICES: every module linked into csi-gateway's binary
// on each release platform, its licence as github.com/google/licensecheck classifies the
// licence file in the module cache, and that file's text (and the module's NOTICE, which
// Apache-2.0 requires to be passed on). It fails when a module has no licence file, or one
// that is not in the allowed list: licences compatible with distributing the gateway under
// Apache-2.0.
//
//	notices [-check] [-out THIRD_PARTY_NOTICES] [-platforms linux/amd64,linux/arm64] [PACKAGE]
//
// Run from the repository's root (`make licenses`); -check compares with the file instead of
// writing it and fails when it is stale (`make licenses-check`, part of `make lint`).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/licensecheck"
)

// allowed are the licences a dependency may have: permissive, or (MPL-2.0) file-level copyleft
// whose source the notice points to. Anything else needs a person's decision first.
var allowed = map[string]bool{
	"Apache-2.0": true, "MIT": true, "BSD-2-Clause": true, "BSD-3-Clause": true, "ISC": true, "MPL-2.0": true,
}

// minCoverage is how much of a licence file must be recognised licence text (percent): a file
// that is mostly something else is read by a person, not guessed.
const minCoverage = 75

type module struct {
	Path, Version, Dir string
	Licence            string // SPDX identifier
	Text, Notice       string
}

func main() {
	check := flag.Bool("check", false, "compare with -out instead of writing it; fail when it differs")
	out := flag.String("out", "THIRD_PARTY_NOTICES", "the notice file")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "GOOS/GOARCH pairs whose linked modules are listed")
	flag.Parse()
	pkg := "./cmd/csi-gateway"
	if flag.NArg() > 0 {
		pkg = flag.Arg(0)
	}
	mods, err := linkedModules(pkg, strings.Split(*platforms, ","))
	if err != nil {
		fail(err)
	}
	var problems []string
	for i := range mods {
		if err := classify(&mods[i]); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		fail(fmt.Errorf("licences not accepted:\n  %s", strings.Join(problems, "\n  ")))
	}
	text := render(mods)
	if *check {
		have, err := os.ReadFile(*out)
		if err != nil || !bytes.Equal(have, text) {
			fail(fmt.Errorf("%s is stale (the linked modules changed): run make licenses and commit it", *out))
		}
		fmt.Printf("%s: current (%d modules)\n", *out, len(mods))
		return
	}
	if err := os.WriteFile(*out, text, 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("%s: %d modules\n", *out, len(mods))
}

// linkedModules lists the modules other than the main one whose packages pkg imports,
// transitively, on any of platforms (GOOS/GOARCH), sorted by path.
func linkedModules(pkg string, platforms []string) ([]module, error) {
	seen := map[string]module{}
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return nil, fmt.Errorf("platform %q: want GOOS/GOARCH", p)
		}
		cmd := exec.Command("go", "list", "-deps", "-f",
			"{{with .Module}}{{if not .Main}}{{with .Replace}}{{.Path}}\t{{.Version}}\t{{.Dir}}{{else}}{{.Path}}\t{{.Version}}\t{{.Dir}}{{end}}{{end}}{{end}}", pkg)
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -deps %s (%s): %w", pkg, p, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, "\t")
			if len(f) == 3 {
				seen[f[0]] = module{Path: f[0], Version: f[1], Dir: f[2]}
			}
		}
	}
	mods := make([]module, 0, len(seen)+1)
	for _, m := range seen {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	// The standard library and runtime are linked in too; their licence is the toolchain's
	// (no version here: the notice does not go stale with a toolchain update).
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	return append(mods, module{Path: "std (the Go standard library and runtime)", Dir: strings.TrimSpace(string(goroot))}), nil
}

// licenceNames and noticeNames are the file names looked for at a module's root, in order.
var (
	licenceNames = []string{"LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "COPYING", "License"}
	noticeNames  = []string{"NOTICE", "NOTICE.txt", "NOTICE.md"}
)

// classify reads m's licence (and notice) file and sets its identifier, or says why not.
func classify(m *module) error {
	m.Text = readFirst(m.Dir, licenceNames)
	m.Notice = readFirst(m.Dir, noticeNames)
	if m.Text == "" {
		return fmt.Errorf("%s@%s: no licence file (%s) in %s", m.Path, m.Version, strings.Join(licenceNames, ", "), m.Dir)
	}
	cov := licensecheck.Scan([]byte(m.Text))
	ids := map[string]bool{}
	for _, match := range cov.Match {
		if !match.IsURL {
			ids[match.ID] = true
		}
	}
	if len(ids) == 0 || cov.Percent < minCoverage {
		return fmt.Errorf("%s@%s: licence file recognised as %v (%.0f%% of its text): read it and decide", m.Path, m.Version, sortedIDs(ids), cov.Percent)
	}
	// A file may hold more than one licence (code taken from elsewhere keeps its own): each
	// must be allowed, and the module is under all of them.
	for id := range ids {
		if !allowed[id] {
			return fmt.Errorf("%s@%s: %s is not an allowed licence (%s)", m.Path, m.Version, id, strings.Join(sortedIDs(allowed), ", "))
		}
	}
	m.Licence = strings.Join(sortedIDs(ids), " AND ")
	return nil
}

func readFirst(dir string, names []string) string {
	for _, n := range names {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
			return string(b)
		}
	}
	return ""
}

func sortedIDs(m map[string]bool) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// render is the notice file: a summary table, then each module's licence and notice.
func render(mods []module) []byte {
	var b bytes.Buffer
	b.WriteString("THIRD-PARTY SOFTWARE NOTICES\n\n")
	b.WriteString("csi-gateway is licensed under the Apache License 2.0 (LICENSE). Its binaries and container\n")
	b.WriteString("image include the following modules, under the licences shown; each module's source is at\n")
	b.WriteString("its module path and version (https://pkg.go.dev/PATH@VERSION). Generated by `make licenses`\n")
	b.WriteString("(tools/notices) from the licence files in the Go module cache; do not edit.\n\n")
	pathW, verW := 0, 0
	for _, m := range mods {
		pathW, verW = max(pathW, len(m.Path)), max(verW, len(m.Version))
	}
	for _, m := range mods {
		fmt.Fprintf(&b, "  %-*s  %-*s  %s\n", pathW, m.Path, verW, m.Version, m.Licence)
	}
	for _, m := range mods {
		fmt.Fprintf(&b, "\n%s\n%s %s (%s)\n%s\n\n%s", strings.Repeat("=", 100), m.Path, m.Version, m.Licence, strings.Repeat("=", 100), strings.TrimRight(m.Text, "\n")+"\n")
		if m.Notice != "" {
			fmt.Fprintf(&b, "\n--- NOTICE ---\n\n%s", strings.TrimRight(m.Notice, "\n")+"\n")
		}
	}
	return b.Bytes()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "notices:", err)
	os.Exit(1)
}
