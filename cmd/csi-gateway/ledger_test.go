package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// ledgerExport is a small export, as `ledger export` writes it.
const ledgerExport = `{
  "format": "csi-gateway-ledger/1",
  "tenants": [
    {"tenant":"blue","objects":{"snapshot":1,"volume":2},"volumeBytes":3072},
    {"tenant":"green","objects":{"volume":1},"volumeBytes":0}
  ],
  "objects": [
    {"kind":"volume","id":"vol-1","tenant":"blue","name":"blue-pvc-1","bytes":1024},
    {"kind":"volume","id":"vol-2","tenant":"blue","bytes":2048},
    {"kind":"volume","id":"vol-3","tenant":"green","name":"green-pvc-1"},
    {"kind":"snapshot","id":"snap-1","tenant":"blue","name":"blue-snap-1"}
  ]
}
`

// runLedger runs the real binary's ledger subcommand and returns its output and exit error.
func runLedger(t *testing.T, args ...string) (string, error) {
	t.Helper()
	p := testutil.Start(t, append([]string{"ledger"}, args...)...)
	err := p.Wait(2 * time.Minute)
	return p.Output(), err
}

// TestLedgerCommand drives the real binary: an export imported into a bbolt file (refused the
// second time without --merge, a no-op with it), migrated to a real 3-member etcd named by a
// gateway configuration file (mTLS) and back into a new bbolt file, whose export is the same
// bytes; the etcd source stays fenced (writes refused) until unfence; a migration into a store
// that holds other records reports the mismatch and fails, lifting the fence it put.
func TestLedgerCommand(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	in := file("in.json", ledgerExport)
	first, back := "bbolt:"+filepath.Join(dir, "first.db"), "bbolt:"+filepath.Join(dir, "back.db")
	if out, err := runLedger(t, "import", "--store", first, in); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	if out, err := runLedger(t, "import", "--store", first, in); err == nil || !strings.Contains(out, "not empty") || !strings.Contains(out, "--merge") {
		t.Errorf("second import without --merge: %v\n%s\nwant refused, pointing at --merge", err, out)
	}
	if out, err := runLedger(t, "import", "--merge", "--store", first, in); err != nil {
		t.Errorf("second import with --merge: %v\n%s", err, out)
	}

	cluster := testutil.StartEtcd(t, 3)
	etcd := "config:" + file("etcd.yaml", fmt.Sprintf("tenancy: {store: {etcd: {endpoints: [%s], tls: {ca: %s, cert: %s, key: %s, serverName: %s}, prefix: /ledger-command/, requestTimeout: 20s}}}\n",
		strings.Join(cluster.Endpoints(), ", "), cluster.CA, cluster.Cert, cluster.Key, cluster.ServerName))
	for _, step := range [][2]string{{first, etcd}, {etcd, back}} {
		out, err := runLedger(t, "migrate", "--from", step[0], "--to", step[1])
		if err != nil || !strings.Contains(out, "verified") || strings.Count(out, "4 objects, sha256 ") != 2 {
			t.Fatalf("migrate %s to %s: %v\n%s", step[0], step[1], err, out)
		}
	}
	// The etcd source stays fenced: no gateway still on it writes what the copy misses.
	if out, err := runLedger(t, "import", "--merge", "--store", etcd, in); err == nil || !strings.Contains(out, "is fenced (csi-gateway ledger migrate to "+back) {
		t.Errorf("import into the migrated etcd ledger: %v\n%s\nwant refused, naming the migration's fence", err, out)
	}
	if out, err := runLedger(t, "unfence", "--store", etcd); err != nil || !strings.Contains(out, "lifted the fence") {
		t.Errorf("unfence: %v\n%s", err, out)
	}
	if out, err := runLedger(t, "import", "--merge", "--store", etcd, in); err != nil {
		t.Errorf("import once unfenced: %v\n%s", err, out)
	}
	exported := filepath.Join(dir, "out.json")
	if out, err := runLedger(t, "export", "--store", back, "-o", exported); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	want, _ := runLedger(t, "export", "--store", first)
	if got, _ := os.ReadFile(exported); !bytes.HasPrefix([]byte(want), got) || len(got) == 0 {
		t.Errorf("the round trip's export:\n%s\nwant the first ledger's:\n%s", got, want)
	}

	other := "bbolt:" + filepath.Join(dir, "other.db")
	if out, err := runLedger(t, "import", "--store", other, file("other.json", strings.ReplaceAll(ledgerExport, "vol-2", "vol-9"))); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	if out, err := runLedger(t, "migrate", "--from", first, "--to", other); err == nil || !strings.Contains(out, "MISMATCH") {
		t.Errorf("migrate into a ledger with other records: %v\n%s\nwant MISMATCH and a failure", err, out)
	}
	// A failed migration lifts the fence it put: the gateways on the source write again.
	if out, err := runLedger(t, "migrate", "--from", etcd, "--to", other); err == nil || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "lifted the fence") {
		t.Errorf("a failed migration from etcd: %v\n%s\nwant MISMATCH and the fence lifted", err, out)
	}
	if out, err := runLedger(t, "import", "--merge", "--store", etcd, in); err != nil {
		t.Errorf("import after a failed migration: %v\n%s", err, out)
	}
	if out, err := runLedger(t, "export", "--store", "bbolt:"+filepath.Join(dir, "missing.db")); err == nil || !strings.Contains(out, "no such file") {
		t.Errorf("export of a missing file: %v\n%s", err, out)
	}
}
