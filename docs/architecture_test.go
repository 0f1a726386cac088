// Package docs holds the tests that keep the documentation and the code from drifting.
package docs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/csi-gateway/csi-gateway/"

// fenced returns the lines of the fenced block of architecture.md whose info string is info.
func fenced(t *testing.T, info string) []string {
	t.Helper()
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && line == "```"+info:
			in = true
		case in && line == "```":
			return lines
		case in && strings.TrimSpace(line) != "":
			lines = append(lines, line)
		}
	}
	t.Fatalf("architecture.md has no ```%s block", info)
	return nil
}

// TestChainMatchesHandler: the chain in architecture.md is the one Server.handler composes,
// in its order: the middlewares passed to chain(...) outermost first, then the innermost
// handler (chain's first argument).
func TestChainMatchesHandler(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../proxy/server.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "handler" || fn.Recv == nil {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isIdent(call.Fun, "chain") {
				return true
			}
			for _, arg := range append(call.Args[1:], call.Args[0]) {
				got = append(got, calledName(arg))
			}
			return false
		})
		return false
	})
	if len(got) == 0 {
		t.Fatal("found no chain(...) call in Server.handler")
	}
	var want []string
	for _, line := range fenced(t, "chain") {
		want = append(want, strings.Fields(line)[0])
	}
	if !slices.Equal(got, want) {
		t.Errorf("Server.handler composes\n  %s\nbut docs/architecture.md says\n  %s\nupdate the ```chain block",
			strings.Join(got, " → "), strings.Join(want, " → "))
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// calledName is the name of the function a middleware argument calls: validate(...) is
// "validate", s.serialize() is "serialize", s.opts.Metrics.Measure() is "Measure".
func calledName(e ast.Expr) string {
	if call, ok := e.(*ast.CallExpr); ok {
		e = call.Fun
	}
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return "?"
}

// importLine is one line of the ```imports block: packages matching from may import, of
// this module, only packages matching one of allowed.
type importLine struct {
	from    string
	allowed []string
}

// matches reports whether pkg (relative to the module) is pattern, or below it when pattern
// ends in "/...".
func matches(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// TestImportsAsDrawn: every package of the module imports, in its production code, only the
// packages of the module its line of architecture.md's ```imports block draws (the first
// line whose left side matches it), and every package has a line.
func TestImportsAsDrawn(t *testing.T) {
	var lines []importLine
	for _, line := range fenced(t, "imports") {
		from, to, ok := strings.Cut(line, "→")
		if !ok {
			t.Fatalf("line %q is not PACKAGE → PACKAGE...", line)
		}
		allowed := strings.Fields(to)
		if len(allowed) == 1 && allowed[0] == "-" {
			allowed = nil
		}
		lines = append(lines, importLine{from: strings.TrimSpace(from), allowed: allowed})
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "../...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkg, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok || pkg == "docs" {
			continue
		}
		seen++
		i := slices.IndexFunc(lines, func(l importLine) bool { return matches(l.from, pkg) })
		if i < 0 {
			t.Errorf("%s has no line in docs/architecture.md's imports block: draw what it may import", pkg)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok || dep == pkg {
				continue
			}
			if !slices.ContainsFunc(lines[i].allowed, func(a string) bool { return matches(a, dep) }) {
				t.Errorf("%s imports %s, which docs/architecture.md does not draw (%s → %s)",
					pkg, dep, lines[i].from, strings.Join(lines[i].allowed, " "))
			}
		}
	}
	if seen == 0 {
		t.Fatal("go list reported no package of the module")
	}
}
