package initiators

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// awkwardIDs are node IDs that a naive file name would get wrong.
var awkwardIDs = []string{
	"node-1.example.com",
	"node/../x",
	"../../etc/passwd",
	"Node 1",
	"node 1",
	"节点-ü-🚀",
	".",
	"..",
	".hidden",
	"a_2F",  // looks like an escape
	"a/",    // escapes to a_2F
	"__abc", // looks like a hashed name
	"C:\\node\x00\n\t%",
	strings.Repeat("n", 256),       // longest CSI node ID: hashed
	strings.Repeat("n", 255) + "m", // hashed, too, and differently
	strings.Repeat("/", 40),        // short, but long once escaped
}

func TestInitiatorsFileName(t *testing.T) {
	for in, want := range map[string]string{
		"node-1.example.com": "node-1.example.com.json",
		"Node 1":             "Node_201.json",
		"node/../x":          "node_2F.._2Fx.json",
		".hidden":            "_2Ehidden.json",
		"a_b":                "a_5Fb.json",
	} {
		if got, err := FileName(in); err != nil || got != want {
			t.Errorf("FileName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := FileName(""); err == nil {
		t.Error("FileName(\"\"): no error")
	}

	seen := map[string]string{}
	for _, id := range awkwardIDs {
		name, err := FileName(id)
		if err != nil {
			t.Fatalf("FileName(%q): %v", id, err)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("FileName(%q) = FileName(%q) = %q", id, other, name)
		}
		seen[name] = id
		if len(name) > maxFileName || strings.HasPrefix(name, ".") || filepath.Base(name) != name || strings.ContainsAny(name, "/\\\x00") {
			t.Errorf("FileName(%q) = %q: not a plain, visible file name of at most %d bytes", id, name, maxFileName)
		}
		for _, c := range []byte(name) { // a Kubernetes ConfigMap key: [-._a-zA-Z0-9]+
			if !keep(c) && c != '_' {
				t.Errorf("FileName(%q) = %q: %q is not a ConfigMap key character", id, name, c)
			}
		}
		back, ok := ParseFileName(name)
		switch hashed := strings.HasPrefix(name, hashedPrefix); {
		case hashed && ok:
			t.Errorf("ParseFileName(%q) = %q, want false for a hashed name", name, back)
		case !hashed && (!ok || back != id):
			t.Errorf("ParseFileName(FileName(%q)) = %q, %v", id, back, ok)
		}
	}
	for _, name := range []string{"", ".json", "a", "a.txt", "a_2.json", "a_ZZ.json", "a_41.json", "a b.json", ".x.json", "__00.json", "a_2f.json"} {
		if id, ok := ParseFileName(name); ok {
			t.Errorf("ParseFileName(%q) = %q, want false", name, id)
		}
	}
}

func TestInitiatorsRegistryRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "registry") // Write creates it
	want := map[string]Node{}
	for i, id := range awkwardIDs {
		n := Node{
			IQNs:     []string{fmt.Sprintf("iqn.2001-04.com.example:node-%d", i)},
			WWPNs:    []string{fmt.Sprintf("10:00:00:90:fa:1b:2c:%02x", i)},
			Networks: []string{"10.0.0.0/24"},
		}
		if i%2 == 0 {
			n.NQNs = []string{fmt.Sprintf("nqn.2014-08.com.example:node-%d", i)}
		}
		if err := Write(dir, id, n); err != nil {
			t.Fatalf("Write(%q): %v", id, err)
		}
		want[id] = n
	}
	for id, n := range want {
		got, ok, err := Lookup(dir, id)
		if err != nil || !ok || !reflect.DeepEqual(got, n) {
			t.Errorf("Lookup(%q) = %+v, %v, %v; want %+v", id, got, ok, err, n)
		}
	}
	// Nothing escaped the directory, and only the nodes' files are in it.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(awkwardIDs) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("registry holds %d files, want %d: %q", len(entries), len(awkwardIDs), names)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("node/../x escaped the registry: %v", err)
	}
	got, err := List(dir)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("List = %+v, %v; want %+v", got, err, want)
	}

	// Rewriting replaces; a node not written is not found.
	n := Node{NQNs: []string{"nqn.2014-08.com.example:new"}}
	if err := Write(dir, "Node 1", n); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := Lookup(dir, "Node 1"); err != nil || !ok || !reflect.DeepEqual(got, n) {
		t.Errorf("Lookup after rewrite = %+v, %v, %v; want %+v", got, ok, err, n)
	}
	if got, ok, err := Lookup(dir, "node-2"); err != nil || ok {
		t.Errorf("Lookup(absent) = %+v, %v, %v; want not found", got, ok, err)
	}
	if _, ok, err := Lookup(filepath.Join(dir, "missing"), "node-2"); err != nil || ok {
		t.Errorf("Lookup(missing dir) = %v, %v; want not found", ok, err)
	}
	if _, _, err := Lookup(dir, ""); err == nil {
		t.Error("Lookup(\"\"): no error")
	}
	if err := Write(dir, "", n); err == nil {
		t.Error("Write(\"\"): no error")
	}
}

// TestInitiatorsRegistryFileFormat: the file is the JSON documented on Write, readable by
// other tools, and world-readable.
func TestInitiatorsRegistryFileFormat(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, "node-1", Node{IQNs: []string{"iqn.2001-04.com.example:n1"}, Networks: []string{"10.1.0.0/16"}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node-1.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "id": "node-1",
  "iqns": [
    "iqn.2001-04.com.example:n1"
  ],
  "networks": [
    "10.1.0.0/16"
  ]
}
`
	if string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644", fi.Mode(), err)
	}
}

// TestInitiatorsRegistryBadFiles: a file that is not a record, or another node's, is an
// error naming it, never another node's initiators.
func TestInitiatorsRegistryBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("garbage.json", "{not json")
	write("noid.json", `{"iqns":["iqn.2001-04.com.example:a"]}`)
	write("node-a.json", `{"id":"NODE-A","iqns":["iqn.2001-04.com.example:a"]}`) // as a case-insensitive FS would leave it
	write(".initiators-123.tmp", "{partial")
	write("README", "not a node")

	for id, msg := range map[string]string{"garbage": "not a node registry file", "noid": "no id", "node-a": `holds node "NODE-A"`} {
		_, ok, err := Lookup(dir, id)
		file := filepath.Join(dir, id+".json")
		if err == nil || ok || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), msg) {
			t.Errorf("Lookup(%q) = %v, %v; want an error naming %s with %q", id, ok, err, file, msg)
		}
	}
	nodes, err := List(dir)
	if err == nil || len(nodes) != 0 {
		t.Errorf("List = %+v, %v; want errors", nodes, err)
	}
	for _, name := range []string{"garbage.json", "noid.json", "node-a.json"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("List error %v does not name %s", err, name)
		}
	}
	if _, err := List(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("List(missing) = %v, want fs.ErrNotExist", err)
	}
}

// TestInitiatorsRegistryConcurrentWriters: writers of the same and of different nodes,
// with readers alongside: a reader sees whole files only, every node ends with one of the
// values written, and no temporary file is left.
func TestInitiatorsRegistryConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	const writers, rounds = 8, 25
	ids := []string{"shared node", "node/../x", "节点"}
	nodeOf := func(w, r int) Node {
		return Node{IQNs: []string{fmt.Sprintf("iqn.2001-04.com.example:w%d-r%d", w, r)}, WWPNs: []string{fmt.Sprintf("10:00:00:00:00:00:%02x:%02x", w, r)}}
	}
	// Readers start once every node has a file, so that each must be found.
	for _, id := range ids {
		if err := Write(dir, id, nodeOf(0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	valid := func(n Node) bool {
		var w, r int
		_, err := fmt.Sscanf(n.IQNs[0], "iqn.2001-04.com.example:w%d-r%d", &w, &r)
		return len(n.IQNs) == 1 && err == nil && reflect.DeepEqual(n, nodeOf(w, r))
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 64)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				if err := Write(dir, ids[(w+r)%len(ids)], nodeOf(w, r)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for i := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[i%len(ids)]
				n, ok, err := Lookup(dir, id)
				if err != nil || !ok || !valid(n) {
					errs <- fmt.Errorf("Lookup(%q) during writes = %+v, %v, %v", id, n, ok, err)
					return
				}
				if _, err := List(dir); err != nil {
					errs <- fmt.Errorf("List during writes: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	for _, id := range ids {
		n, ok, err := Lookup(dir, id)
		if err != nil || !ok || !valid(n) {
			t.Errorf("Lookup(%q) = %+v, %v, %v; want one of the values written", id, n, ok, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(ids) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("registry holds %q, want %d files and no temporary file", names, len(ids))
	}
}

// TestInitiatorsRegistryWriteFailure: a failed write leaves no temporary file behind and
// the old file in place.
func TestInitiatorsRegistryWriteFailure(t *testing.T) {
	dir := t.TempDir()
	old := Node{IQNs: []string{"iqn.2001-04.com.example:old"}}
	if err := Write(dir, "n", old); err != nil {
		t.Fatal(err)
	}
	// A directory where the file goes makes the rename fail.
	if err := os.Mkdir(filepath.Join(dir, "blocked.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "blocked.json", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "blocked", old); err == nil {
		t.Fatal("Write over a directory: no error")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if n, ok, err := Lookup(dir, "n"); err != nil || !ok || !reflect.DeepEqual(n, old) {
		t.Errorf("Lookup = %+v, %v, %v", n, ok, err)
	}
	// A registry path that is a file cannot be written.
	file := filepath.Join(dir, "n.json")
	if err := Write(file, "x", old); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("Write into a file = %v, want an error naming it", err)
	}
}
