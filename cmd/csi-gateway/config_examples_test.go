package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// An example configuration: where it was found (file:line), its text, and the environment
// it is run in (KEY=value: what its orchestrator sets).
type example struct {
	where, yaml string
	env         []string
}

// TestExampleConfigsCheck runs `csi-gateway serve --check-config` (the real binary) on every
// gateway configuration in README.md, docs/ and deploy/, so that no example goes stale:
//   - the fenced ```yaml blocks of the Markdown files whose top-level keys are
//     configuration keys (a Kubernetes manifest or a kustomization is not a configuration);
//   - the YAML files under deploy/ that are configurations (the ConfigMaps' sources, the
//     systemd example), by the same rule;
//   - the config.yaml templates of the Nomad jobs, their ${var.x} and {{ env "X" }} replaced
//     by exampleVariables or by the variable's default, one example for each side of every
//     %{ if }…%{ else }…%{ endif } directive, run with the CSI_ENDPOINT Nomad sets.
//
// The files an example names (TLS material, credentials, the token key) are created as
// placeholders under a temporary root, and the example's paths rewritten to them: Validate
// checks they can be read, not what they hold. The Helm chart's renders are not covered.
func TestExampleConfigsCheck(t *testing.T) {
	examples := markdownExamples(t)
	examples = append(examples, deployExamples(t)...)
	if len(examples) < 15 {
		t.Fatalf("found %d example configurations; the extraction no longer finds them", len(examples))
	}
	bin := testutil.Binary(t)
	for _, ex := range examples {
		t.Run(ex.where, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.yaml")
			writeFileAt(t, file, withPlaceholderFiles(t, ex.yaml))
			out, err := runGateway(t, bin, ex.env, "serve", "--check-config", "--config", file)
			if err != nil || strings.TrimSpace(out) != "configuration OK" {
				t.Fatalf("serve --check-config: %v\n%s\nthe example:\n%s", err, out, ex.yaml)
			}
		})
	}
}

// runGateway runs the binary with an environment of its own, env and no CSI_ENDPOINT or
// CSIGW_* of the test's, and returns what it printed, bounded at a minute.
func runGateway(t *testing.T, bin string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var fence = regexp.MustCompile("(?s)```ya?ml\n(.*?)```")

// markdownExamples returns the configurations in the ```yaml blocks of README.md and docs/.
func markdownExamples(t *testing.T) []example {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := filepath.Glob("../../docs/*/*.md")
	files = append(append([]string{"../../README.md"}, files...), sub...)
	var out []example
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllSubmatchIndex(data, -1) {
			body := string(data[m[2]:m[3]])
			if isGatewayConfig(t, body) {
				line := strings.Count(string(data[:m[0]]), "\n") + 1
				out = append(out, example{where: strings.TrimPrefix(f, "../../") + ":" + strconv.Itoa(line), yaml: body})
			}
		}
	}
	return out
}

// deployExamples returns the configurations under deploy/: YAML files and Nomad templates.
func deployExamples(t *testing.T) []example {
	var out []example
	err := filepath.WalkDir("../../deploy", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.Contains(path, "/helm/") {
			return nil // templates and values, not configurations
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		where := strings.TrimPrefix(path, "../../")
		switch {
		case strings.HasSuffix(path, ".yaml") && isGatewayConfig(t, string(data)):
			out = append(out, example{where: where, yaml: string(data)})
		case strings.HasSuffix(path, ".nomad.hcl"):
			out = append(out, nomadConfigTemplates(t, where, string(data))...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	nomadTemplate = regexp.MustCompile(`(?s)destination\s*=\s*"[^"]*config\.yaml"\s*\n\s*data\s*=\s*<<-EOT\n(.*?)\n\s*EOT`)
	nomadVariable = regexp.MustCompile(`(?s)variable\s+"(\w+)"\s*\{[^}]*?default\s*=\s*"([^"]*)"`)
	nomadRef      = regexp.MustCompile(`\$\{var\.(\w+)\}`)
	nomadEnvRef   = regexp.MustCompile(`\{\{\s*env\s+"(\w+)"\s*\}\}`)
	nomadIf       = regexp.MustCompile(`(?s)%\{ if [^}]*\}(.*?)%\{ else \}(.*?)%\{ endif \}`)
)

// exampleVariables are values for the Nomad variables that have no default, and for the
// environment variables a template reads ({{ env "NAME" }}).
var exampleVariables = map[string]string{
	"appliance_url":     "https://appliance.example.com:8443",
	"NOMAD_ADDR_admin":  "127.0.0.1:9808",
	"NOMAD_SECRETS_DIR": "/secrets",
}

// nomadPluginEnv is what Nomad sets for a CSI plugin task: the gateway serves CSI_ENDPOINT.
var nomadPluginEnv = []string{"CSI_ENDPOINT=unix:///csi/csi.sock"}

// nomadConfigTemplates returns the config.yaml templates of a Nomad job, dedented (<<-) and
// with their variables filled in, once for each side of their %{ if } directives.
func nomadConfigTemplates(t *testing.T, where, hcl string) []example {
	defaults := map[string]string{}
	for _, m := range nomadVariable.FindAllStringSubmatch(hcl, -1) {
		defaults[m[1]] = m[2]
	}
	fill := func(re *regexp.Regexp) func(string) string {
		return func(ref string) string {
			name := re.FindStringSubmatch(ref)[1]
			if v, ok := exampleVariables[name]; ok {
				return v
			}
			if v, ok := defaults[name]; ok {
				return v
			}
			t.Errorf("%s: %s has no default: add an example value to exampleVariables", where, ref)
			return ref
		}
	}
	var out []example
	for _, m := range nomadTemplate.FindAllStringSubmatchIndex(hcl, -1) {
		at := where + ":" + strconv.Itoa(strings.Count(hcl[:m[0]], "\n")+1)
		for i, body := range templateBranches(hcl[m[2]:m[3]]) {
			body = nomadRef.ReplaceAllStringFunc(dedent(body), fill(nomadRef))
			body = nomadEnvRef.ReplaceAllStringFunc(body, fill(nomadEnvRef))
			out = append(out, example{where: at + "#" + strconv.Itoa(i+1), yaml: body, env: nomadPluginEnv})
		}
	}
	return out
}

// templateBranches returns the texts an HCL template can render: one for each combination of
// the sides of its (unnested) %{ if }…%{ else }…%{ endif } directives.
func templateBranches(text string) []string {
	m := nomadIf.FindStringSubmatchIndex(text)
	if m == nil {
		return []string{text}
	}
	var out []string
	for _, side := range [][2]int{{m[2], m[3]}, {m[4], m[5]}} {
		out = append(out, templateBranches(text[:m[0]]+text[side[0]:side[1]]+text[m[1]:])...)
	}
	return out
}

// dedent removes the indentation common to every non-blank line, as a <<- heredoc does.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " \t")); indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

// isGatewayConfig reports whether a YAML text is a gateway configuration: a mapping with at
// least one of Config's top-level keys and nothing of a Kubernetes object or kustomization.
func isGatewayConfig(t *testing.T, text string) bool {
	var top map[string]any
	if err := yaml.Unmarshal([]byte(text), &top); err != nil || top == nil {
		return false
	}
	keys := structKeys(reflect.TypeFor[Config]())
	gateway := false
	for k := range top {
		if slices.Contains([]string{"apiVersion", "kind", "resources", "components"}, k) {
			return false
		}
		if _, ok := keys[strings.ToLower(k)]; ok {
			gateway = true
		}
	}
	return gateway
}

// fileKeys are the keys whose values are files the gateway reads at start.
var fileKeys = []string{"cert", "key", "clientCA", "ca", "bearerTokenFile", "usernameFile", "passwordFile", "tokenKeyFile"}

// secretFieldsOf returns the secretFields of a descriptorSets entry (a mapping node).
func secretFieldsOf(entry *yaml.Node) []string {
	var out []string
	for i := 0; i+1 < len(entry.Content); i += 2 {
		if entry.Content[i].Value == "secretFields" {
			for _, f := range entry.Content[i+1].Content {
				out = append(out, f.Value)
			}
		}
	}
	return out
}

// descriptorSetDeclaring returns a descriptor set in which each of fields (full names:
// package.Message.field) is a string field, for an example's placeholder descriptor set.
func descriptorSetDeclaring(fields []string) *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	for i, f := range fields {
		parts := strings.Split(f, ".")
		if len(parts) < 3 {
			continue // not a full name: the gateway's check reports it
		}
		set.File = append(set.File, &descriptorpb.FileDescriptorProto{
			Name: proto.String(fmt.Sprintf("example%d.proto", i)), Package: proto.String(strings.Join(parts[:len(parts)-2], ".")),
			Syntax: proto.String("proto3"),
			MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String(parts[len(parts)-2]), Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String(parts[len(parts)-1]), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}}}},
		})
	}
	return set
}

// withPlaceholderFiles returns text with every absolute path under a fileKeys key moved under
// a temporary root, where a placeholder is created (a hex key for tokenKeyFile; for a
// descriptorSets file, a set that declares the entry's secretFields).
func withPlaceholderFiles(t *testing.T, text string) string {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "file" && v.Kind == yaml.ScalarNode && strings.HasPrefix(v.Value, "/") { // descriptorSets[]
					v.Value = filepath.Join(root, v.Value)
					writeFileAt(t, v.Value, string(testutil.MustMarshal(t, descriptorSetDeclaring(secretFieldsOf(n)))))
				}
				if slices.Contains(fileKeys, k.Value) && v.Kind == yaml.ScalarNode && strings.HasPrefix(v.Value, "/") {
					v.Value = filepath.Join(root, v.Value)
					writePlaceholder(t, v.Value)
					if k.Value == "tokenKeyFile" {
						writeFileAt(t, v.Value, strings.Repeat("0f", 32)+"\n")
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
