package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestSocketModeUnquoted is the last row of issue 16's table: `socketMode: 0660` written
// without quotes is a YAML integer (432 in decimal), and a gateway that took it as the mode's
// digits gave its socket mode 0432 (the owner cannot connect, every local user can). The
// binary must refuse it with an error that names the key. It is the same on both transports.
func TestSocketModeUnquoted(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gw.sock")
	config := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf("listeners:\n  - endpoint: unix://%s\n    socketMode: 0660\nbackends: {embedded: {type: embedded, dataDir: %s}}\nroutes: [{methods: [\"*\"], backend: embedded}]\n",
		sock, filepath.Join(dir, "data"))
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testutil.Start(t, "serve", "--config", config)
	err := waitReady(p, sock)
	if err != nil {
		out := p.Output()
		if !strings.Contains(out, "socketMode") {
			t.Errorf("the gateway refused the configuration (%v) without naming socketMode:\n%s", err, out)
		}
		t.Logf("refused, as it should be: %s", tail(strings.TrimSpace(out), 300))
		return
	}
	fi, statErr := os.Stat(sock)
	if statErr != nil {
		t.Fatal(statErr)
	}
	t.Errorf("the gateway started with an unquoted socketMode: 0660 and gave its socket mode %04o; want a configuration error naming socketMode",
		fi.Mode().Perm())
}
