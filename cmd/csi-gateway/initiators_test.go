package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/csi-gateway/csi-gateway/backends/rest/csp/initiators"
)

// initiatorsFixtures are the fixture trees of the initiators package.
var initiatorsFixtures = filepath.Join("..", "..", "backends", "rest", "csp", "initiators", "testdata")

// initiatorsResult is what a run of `csi-gateway initiators` printed and its exit status.
type initiatorsResult struct {
	stdout, stderr string
	code           int
}

// runInitiators runs `csi-gateway initiators args...` as run does, with the exit status
// that main would give.
func runInitiators(t *testing.T, args ...string) initiatorsResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := &cobra.Command{Use: "csi-gateway", SilenceUsage: true, SilenceErrors: true}
	root.SetArgs(append([]string{"initiators"}, args...))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.AddCommand(newInitiatorsCommand())
	err := root.ExecuteContext(t.Context())
	code := exitCode(err, &stderr)
	return initiatorsResult{stdout.String(), stderr.String(), code}
}

// initiatorsEntry is an entry of backends.NAME.csp.nodes, as the command prints it.
type initiatorsEntry struct {
	ID              string `yaml:"id"`
	initiators.Node `yaml:",inline"`
}

// parseInitiatorsEntries parses the command's output as a YAML list of node entries.
func parseInitiatorsEntries(t *testing.T, out string) []initiatorsEntry {
	t.Helper()
	var entries []initiatorsEntry
	dec := yaml.NewDecoder(strings.NewReader(out))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil {
		t.Fatalf("output is not a YAML list of nodes: %v\n%s", err, out)
	}
	return entries
}

func TestInitiatorsCommandPrintsNode(t *testing.T) {
	r := runInitiators(t, "--root", filepath.Join(initiatorsFixtures, "all"), "--node-id", "worker-1", "--networks", "10.10.0.0/24,fd00::/64")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	want := `- {id: "worker-1", iqns: ["iqn.1994-05.com.redhat:5b8e6a1c3d2f"], wwpns: ["50:01:43:80:12:34:56:78"], nqns: ["nqn.2014-08.org.nvmexpress:uuid:0b6f0c2e-7d1a-4e8b-9a51-3c2d1e0f9a87"], networks: ["10.10.0.0/24", "fd00::/64"]}` + "\n"
	if r.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	got := parseInitiatorsEntries(t, r.stdout)
	wantEntries := []initiatorsEntry{{ID: "worker-1", Node: initiators.Node{
		IQNs:     []string{"iqn.1994-05.com.redhat:5b8e6a1c3d2f"},
		WWPNs:    []string{"50:01:43:80:12:34:56:78"},
		NQNs:     []string{"nqn.2014-08.org.nvmexpress:uuid:0b6f0c2e-7d1a-4e8b-9a51-3c2d1e0f9a87"},
		Networks: []string{"10.10.0.0/24", "fd00::/64"},
	}}}
	if !reflect.DeepEqual(got, wantEntries) {
		t.Errorf("parsed %+v, want %+v", got, wantEntries)
	}
}

// TestInitiatorsCommandFixtures: each fixture prints what it holds, and the awkward node
// ID survives YAML's quoting; the default node ID is the host name.
func TestInitiatorsCommandFixtures(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		fixture string
		args    []string
		want    initiatorsEntry
	}{
		{"iscsi-debian", nil, initiatorsEntry{ID: host, Node: initiators.Node{IQNs: []string{"iqn.1993-08.org.debian:01:9d3a8c1b2e4f"}}}},
		{"nvme-only", []string{"--node-id", `yes: "x" # 1`}, initiatorsEntry{ID: `yes: "x" # 1`, Node: initiators.Node{NQNs: []string{"nqn.2014-08.org.nvmexpress:uuid:4c4c4544-0035-4810-8058-b3c04f4d3432"}}}},
		{"fc-two-hbas", []string{"--node-id", "节点 1"}, initiatorsEntry{ID: "节点 1", Node: initiators.Node{WWPNs: []string{"10:00:00:90:fa:1b:2c:3d", "10:00:00:90:fa:1b:2c:3e"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			r := runInitiators(t, append([]string{"--root", filepath.Join(initiatorsFixtures, tt.fixture)}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "- {") {
				t.Errorf("stdout %q: want one flow-style list entry", r.stdout)
			}
			if got := parseInitiatorsEntries(t, r.stdout); !reflect.DeepEqual(got, []initiatorsEntry{tt.want}) {
				t.Errorf("parsed %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestInitiatorsCommandWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "registry")
	id := "node/../x"
	r := runInitiators(t, "--root", filepath.Join(initiatorsFixtures, "all"), "--node-id", id, "--write", dir, "--networks", "10.0.0.0/8")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	file := filepath.Join(dir, "node_2F.._2Fx.json")
	if !strings.Contains(r.stderr, file) {
		t.Errorf("stderr %q does not name %s", r.stderr, file)
	}
	got, ok, err := initiators.Lookup(dir, id)
	if err != nil || !ok {
		t.Fatalf("Lookup = %v, %v", ok, err)
	}
	printed := parseInitiatorsEntries(t, r.stdout)
	if len(printed) != 1 || !reflect.DeepEqual(got, printed[0].Node) || len(got.Networks) != 1 {
		t.Errorf("stored %+v, printed %+v", got, printed)
	}
}

func TestInitiatorsCommandFailures(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		args []string
		code int
		msg  []string // in stderr
	}{
		{"no initiator", []string{"--root", filepath.Join(initiatorsFixtures, "none")}, 1,
			[]string{"no initiator found under", "etc/iscsi/initiatorname.iscsi", "etc/nvme/hostnqn", "sys/class/fc_host/host*/port_name"}},
		{"malformed initiatorname", []string{"--root", filepath.Join(initiatorsFixtures, "malformed-iscsi")}, 1,
			[]string{filepath.Join(initiatorsFixtures, "malformed-iscsi", "etc", "iscsi", "initiatorname.iscsi"), "no InitiatorName= line"}},
		{"missing root", []string{"--root", missing}, 1, []string{missing}},
		{"bad network", []string{"--root", filepath.Join(initiatorsFixtures, "all"), "--networks", "10.0.0.0/24,10.1.0.0"}, exitUsage, []string{`"10.1.0.0" is not a CIDR`}},
		{"empty node ID", []string{"--root", filepath.Join(initiatorsFixtures, "all"), "--node-id", ""}, exitUsage, []string{"--node-id: empty"}},
		{"long node ID", []string{"--root", filepath.Join(initiatorsFixtures, "all"), "--node-id", strings.Repeat("n", 257)}, exitUsage, []string{"257 bytes"}},
		{"argument", []string{"extra"}, exitUsage, []string{"takes no arguments"}},
		{"unknown flag", []string{"--bogus"}, exitUsage, []string{"unknown flag: --bogus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "registry")
			r := runInitiators(t, append(tt.args, "--write", dir)...)
			if r.code != tt.code || r.stdout != "" {
				t.Errorf("exit %d, stdout %q; want exit %d and nothing", r.code, r.stdout, tt.code)
			}
			if !strings.HasPrefix(r.stderr, "csi-gateway initiators: ") {
				t.Errorf("stderr %q: want a csi-gateway initiators: message", r.stderr)
			}
			for _, m := range tt.msg {
				if !strings.Contains(r.stderr, m) {
					t.Errorf("stderr %q does not say %q", r.stderr, m)
				}
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("a failed run wrote the registry")
			}
		})
	}
}
