// Command deploylint validates rendered Kubernetes manifests strictly against the schemas of
// one Kubernetes release, offline: it converts that release's OpenAPI document (swagger.json,
// from the k8s.io/kubernetes module in the Go module cache) and the CustomResourceDefinitions
// it is given into JSON schemas, then validates with kubeconform's validator (strict: a field
// no schema lists, or a key given twice, is an error). `make deploy-lint` runs it on every
// kustomize overlay and every Helm values file.
//
//	deploylint -openapi swagger.json [-crds a.yaml,b.yaml] [-skip Kind,Kind] NAME=FILE...
//
// Each argument is a name to report and a file of manifests (YAML, "---"-separated). A kind
// with no schema is an error, unless listed in -skip. It exits 1 when a manifest is invalid.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/yannh/kubeconform/pkg/validator"
)

func main() {
	openapi := flag.String("openapi", "", "the Kubernetes OpenAPI v2 document (api/openapi-spec/swagger.json)")
	crds := flag.String("crds", "", "comma-separated files of CustomResourceDefinitions whose kinds the manifests use")
	skip := flag.String("skip", "", "comma-separated kinds not validated (no schema available); say why where this is called")
	flag.Parse()
	if *openapi == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: deploylint -openapi swagger.json [-crds files] [-skip kinds] NAME=FILE...")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "deploylint-schemas-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	kinds, err := writeSchemas(*openapi, splitList(*crds), dir)
	if err != nil {
		fail(err)
	}
	fmt.Printf("deploylint: %d schemas from %s and %d CRD files\n", kinds, *openapi, len(splitList(*crds)))
	v, err := newValidator(dir, splitList(*skip))
	if err != nil {
		fail(err)
	}
	bad := false
	for _, arg := range flag.Args() {
		name, file, ok := strings.Cut(arg, "=")
		if !ok {
			name, file = arg, arg
		}
		f, err := os.Open(file)
		if err != nil {
			fail(err)
		}
		if !lint(v, name, f, os.Stdout) {
			bad = true
		}
	}
	if bad {
		os.Exit(1)
	}
}

// writeSchemas writes the strict schemas of the OpenAPI document's kinds and of the CRDs'
// under dir, and returns how many.
func writeSchemas(openapi string, crds []string, dir string) (int, error) {
	n, err := writeOpenAPISchemas(openapi, dir)
	if err != nil {
		return n, err
	}
	m, err := writeCRDSchemas(crds, dir)
	return n + m, err
}

// newValidator is kubeconform's validator on the schemas under dir: strict, and a kind
// without a schema is an error unless skipped.
func newValidator(dir string, skip []string) (validator.Validator, error) {
	skipKinds := map[string]struct{}{}
	for _, k := range skip {
		skipKinds[k] = struct{}{}
	}
	return validator.New([]string{dir + "/" + schemaTemplate}, validator.Opts{Strict: true, SkipKinds: skipKinds})
}

// lint validates the manifests r holds, reports each problem and a summary line under name on
// w, and says whether all were valid (skipped kinds count as valid; no manifest at all does not).
func lint(v validator.Validator, name string, r io.ReadCloser, w io.Writer) bool {
	counts := map[validator.Status]int{}
	ok := true
	for _, res := range v.Validate(name, r) {
		counts[res.Status]++
		if res.Status != validator.Invalid && res.Status != validator.Error {
			continue
		}
		ok = false
		sig, _ := res.Resource.Signature()
		what := "?"
		if sig != nil {
			what = sig.Kind + " " + sig.Name
		}
		if res.Err != nil {
			// kubeconform words a schema violation as a formatting problem; it is not one.
			msg := strings.TrimPrefix(res.Err.Error(), "problem validating schema. Check JSON formatting: ")
			fmt.Fprintf(w, "%s: %s: %s\n", name, what, msg)
		}
		for _, e := range res.ValidationErrors {
			fmt.Fprintf(w, "%s: %s: %s: %s\n", name, what, e.Path, e.Msg)
		}
	}
	if counts[validator.Valid] == 0 {
		fmt.Fprintf(w, "%s: no manifest validated\n", name)
		ok = false
	}
	fmt.Fprintf(w, "%-68s %3d valid, %d invalid, %d errors, %d skipped\n", name+":",
		counts[validator.Valid], counts[validator.Invalid], counts[validator.Error], counts[validator.Skipped])
	return ok
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "deploylint:", err)
	os.Exit(2)
}
