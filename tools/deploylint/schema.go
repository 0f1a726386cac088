package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// A schema node, as decoded from JSON: keyword → value.
type node = map[string]any

// schemaPath is where a kind's schema is written under dir, and the kubeconform location
// template that finds it: the API group (the version alone for the core group), then the
// lower-case kind and the version. Unlike kubeconform's default file names, two groups with
// the same first label (e.g. cert-manager.io and acme.cert-manager.io) cannot collide.
const schemaTemplate = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"

func schemaPath(dir, group, version, kind string) string {
	if group == "" {
		group = version
	}
	return filepath.Join(dir, group, strings.ToLower(kind)+"_"+version+".json")
}

// writeOpenAPISchemas converts the Kubernetes OpenAPI v2 document at spec (swagger.json) into
// one strict JSON schema per kind under dir; it returns how many it wrote. Each file holds the
// kind's definition and every definition it reaches, so it stands alone.
func writeOpenAPISchemas(spec, dir string) (int, error) {
	b, err := os.ReadFile(spec)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Definitions map[string]node `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", spec, err)
	}
	if len(doc.Definitions) == 0 {
		return 0, fmt.Errorf("%s: no definitions: not an OpenAPI v2 document", spec)
	}
	defs := make(map[string]node, len(doc.Definitions))
	for name, d := range doc.Definitions {
		defs[name] = strictDefinition(name, d)
	}
	n := 0
	for _, name := range sortedKeys(doc.Definitions) {
		gvks, _ := doc.Definitions[name]["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(node)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			kind, _ := gvk["kind"].(string)
			schema := node{"$ref": "#/definitions/" + name, "definitions": reachable(defs, name)}
			if err := writeJSON(schemaPath(dir, group, version, kind), schema); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// writeCRDSchemas writes the strict schema of every version of every CustomResourceDefinition
// in the YAML files crds (one or more documents each) under dir; it returns how many.
func writeCRDSchemas(crds []string, dir string) (int, error) {
	n := 0
	for _, f := range crds {
		b, err := os.ReadFile(f)
		if err != nil {
			return n, err
		}
		for _, doc := range splitDocuments(b) {
			var crd struct {
				Kind string `json:"kind"`
				Spec struct {
					Group string `json:"group"`
					Names struct {
						Kind string `json:"kind"`
					} `json:"names"`
					Versions []struct {
						Name   string `json:"name"`
						Schema struct {
							OpenAPIV3Schema node `json:"openAPIV3Schema"`
						} `json:"schema"`
					} `json:"versions"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(doc, &crd); err != nil {
				return n, fmt.Errorf("%s: %w", f, err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Schema.OpenAPIV3Schema == nil {
					return n, fmt.Errorf("%s: %s %s has no openAPIV3Schema", f, crd.Spec.Names.Kind, v.Name)
				}
				if err := writeJSON(schemaPath(dir, crd.Spec.Group, v.Name, crd.Spec.Names.Kind), strict(v.Schema.OpenAPIV3Schema)); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	return n, nil
}

// strictDefinition is the strict form of an OpenAPI v2 definition. The two types Kubernetes
// serializes as more than one JSON type are spelled out: an IntOrString is a string or an
// integer, a Quantity a string or a number ("1", 1 and "1Gi" are all quantities).
func strictDefinition(name string, d node) node {
	switch name {
	case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
		return node{"type": []any{"string", "integer", "null"}}
	case "io.k8s.apimachinery.pkg.api.resource.Quantity":
		return node{"type": []any{"string", "number", "null"}}
	}
	return strict(d)
}

// strict returns a copy of the schema s in which every object that lists its properties
// admits no other (additionalProperties: false, unless it says otherwise or preserves unknown
// fields), every typed value may also be null (as the API server reads a null field as unset),
// and what validation does not use (descriptions, formats, x- extensions) is dropped: formats
// because the OpenAPI ones (int32, byte, int-or-string) are not JSON Schema's.
func strict(s node) node {
	out := node{}
	for k, v := range s {
		switch {
		case k == "description" || k == "format" || k == "example" || strings.HasPrefix(k, "x-"):
		case k == "properties":
			props := node{}
			for name, p := range v.(node) {
				props[name] = strict(p.(node))
			}
			out[k] = props
		case k == "items" || k == "not":
			if sub, ok := v.(node); ok {
				out[k] = strict(sub)
			} else {
				out[k] = v
			}
		case k == "additionalProperties":
			if sub, ok := v.(node); ok {
				out[k] = strict(sub)
			} else {
				out[k] = v
			}
		case k == "allOf" || k == "anyOf" || k == "oneOf":
			var list []any
			for _, sub := range v.([]any) {
				list = append(list, strict(sub.(node)))
			}
			out[k] = list
		case k == "type":
			if t, ok := v.(string); ok {
				out[k] = []any{t, "null"}
			} else {
				out[k] = v
			}
		default:
			out[k] = v
		}
	}
	_, hasProps := s["properties"]
	_, hasAdditional := s["additionalProperties"]
	preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool)
	if hasProps && !hasAdditional && !preserve {
		out["additionalProperties"] = false
	}
	return out
}

// reachable returns the definitions name refers to, itself included, transitively.
func reachable(defs map[string]node, name string) node {
	out := node{}
	var visit func(string)
	visit = func(n string) {
		if _, seen := out[n]; seen {
			return
		}
		d, ok := defs[n]
		if !ok {
			return
		}
		out[n] = d
		for _, r := range refs(d) {
			visit(r)
		}
	}
	visit(name)
	return out
}

// refs lists the definition names a schema's $refs point to.
func refs(v any) []string {
	var out []string
	switch t := v.(type) {
	case node:
		for k, sub := range t {
			if s, ok := sub.(string); ok && k == "$ref" {
				out = append(out, strings.TrimPrefix(s, "#/definitions/"))
			} else {
				out = append(out, refs(sub)...)
			}
		}
	case []any:
		for _, sub := range t {
			out = append(out, refs(sub)...)
		}
	}
	return out
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// splitDocuments splits a YAML stream on its "---" separator lines.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range strings.Split("\n"+string(b), "\n---") {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}
