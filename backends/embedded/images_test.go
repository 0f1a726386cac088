package embedded

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRemoveDeletedImagesLogsWhatStays(t *testing.T) {
	var logs bytes.Buffer
	a, err := Open(Config{DataDir: t.TempDir()}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	gone, stays := a.images.volumePath("vol-gone"), a.images.volumePath("vol-stays")
	if err := os.WriteFile(gone, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory that is not empty cannot be removed, by root neither.
	if err := os.MkdirAll(filepath.Join(stays, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}

	a.removeDeletedImages("volume", a.images.volumePath, []string{"vol-gone", "vol-stays"}, "volume_group_id", "grp-1")

	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("the image of vol-gone is still there (stat: %v)", err)
	}
	// One warning, for the image that stays: none for the one removed.
	warnings := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(warnings) != 1 {
		t.Fatalf("want one warning, for vol-stays; got %q", warnings)
	}
	for _, want := range []string{"level=WARN", "volume deleted but its image stays until the next start", "volume_id=vol-stays", "volume_group_id=grp-1"} {
		if !strings.Contains(warnings[0], want) {
			t.Errorf("warning %q does not mention %q", warnings[0], want)
		}
	}
}
