package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// k8sModule is the Kubernetes release whose OpenAPI document the schemas come from; the
// Makefile's K8S_OPENAPI_VERSION says the same.
const k8sModule = "k8s.io/kubernetes@v1.31.4"

// openAPI returns the path of swagger.json in the module cache (downloading the module).
func openAPI(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", k8sModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", k8sModule, err)
	}
	var dir string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), `"Dir": "`); ok {
			dir = strings.TrimSuffix(v, `",`)
		}
	}
	if dir == "" {
		t.Fatalf("go mod download %s: no Dir in\n%s", k8sModule, out)
	}
	return filepath.Join(dir, "api", "openapi-spec", "swagger.json")
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: demo, namespace: demo, labels: {app: demo}}
spec:
  replicas: 2
  selector: {matchLabels: {app: demo}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1, maxSurge: 25%}}
  template:
    metadata: {labels: {app: demo}, annotations: null}
    spec:
      containers:
        - name: demo
          image: example/demo:v1
          ports: [{name: admin, containerPort: 9808}]
          livenessProbe: {httpGet: {path: /healthz, port: admin}}
          resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {cpu: 1, memory: 128Mi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: demo}
spec: {maxUnavailable: 1, selector: {matchLabels: {app: demo}}}
`

const certificateCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              properties:
                size: {type: integer}
                labels: {type: object, additionalProperties: {type: string}}
                free: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestStrictValidation: the manifests deploy-lint is given pass when every field is one the
// Kubernetes 1.31 schemas (or the CRD's) list, and fail on a misspelled field at any depth, an
// int-or-string or quantity of the wrong type, and a kind without a schema; a CRD's maps and
// preserved fields stay open.
func TestStrictValidation(t *testing.T) {
	dir := t.TempDir()
	crd := filepath.Join(dir, "crd.yaml")
	if err := os.WriteFile(crd, []byte(certificateCRD), 0o644); err != nil {
		t.Fatal(err)
	}
	schemas := filepath.Join(dir, "schemas")
	n, err := writeSchemas(openAPI(t), []string{crd}, schemas)
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("%d schemas written; want every kind of Kubernetes 1.31", n)
	}
	v, err := newValidator(schemas, []string{"Skipped"})
	if err != nil {
		t.Fatal(err)
	}
	widget := "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3, labels: {a: b}, free: {any: [thing]}}\n"
	for _, c := range []struct {
		name      string
		manifests string
		valid     bool
		want      string // in the report of an invalid one
	}{
		{"valid", deployment, true, ""},
		{"misspelled top-level spec field", strings.Replace(deployment, "replicas: 2", "replcas: 2", 1), false, "replcas"},
		{"misspelled container field", strings.Replace(deployment, "image: example", "imgae: example", 1), false, "imgae"},
		{"misspelled field in the PodDisruptionBudget", strings.Replace(deployment, "maxUnavailable: 1, selector", "maxUnavalable: 1, selector", 1), false, "maxUnavalable"},
		{"port neither name nor number", strings.Replace(deployment, "port: admin}", "port: {name: admin}}", 1), false, "port"},
		{"quantity of the wrong type", strings.Replace(deployment, "cpu: 1,", "cpu: [1],", 1), false, "cpu"},
		{"a key given twice", strings.Replace(deployment, "replicas: 2", "replicas: 2\n  replicas: 3", 1), false, "replicas"},
		{"no schema for the kind", deployment + "---\napiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n", false, "Gadget"},
		{"skipped kind", deployment + "---\napiVersion: example.com/v1\nkind: Skipped\nmetadata: {name: s}\n", true, ""},
		{"CRD kind", deployment + "---\n" + widget, true, ""},
		{"misspelled CRD field", deployment + "---\n" + strings.Replace(widget, "size: 3", "sise: 3", 1), false, "sise"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var report bytes.Buffer
			ok := lint(v, c.name, io.NopCloser(strings.NewReader(c.manifests)), &report)
			if ok != c.valid {
				t.Fatalf("valid = %v, want %v; report:\n%s", ok, c.valid, report.String())
			}
			if !strings.Contains(report.String(), c.want) {
				t.Errorf("report does not name %q:\n%s", c.want, report.String())
			}
		})
	}
}
