package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tableSeparator is a Markdown table's second line: |---|:--:|...
var tableSeparator = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+$`)

// TestTablesHaveHeaders: every Markdown table in docs/ and the README starts with a header
// and its separator line. A paragraph dropped between a table's rows makes the rows after it
// a headerless block that renders as raw text (configuration.md hid the embedded and retry
// keys that way).
func TestTablesHaveHeaders(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("*/*.md")
	files = append(append(files, more...), filepath.Join("..", "README.md"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		inFence := false
		for i, line := range lines {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			starts := strings.HasPrefix(line, "|") && (i == 0 || !strings.HasPrefix(lines[i-1], "|"))
			if inFence || !starts {
				continue
			}
			if i+1 >= len(lines) || !tableSeparator.MatchString(strings.TrimSpace(lines[i+1])) {
				t.Errorf("%s:%d: a table without a header and |---| line (a paragraph between its rows?): %.80s", name, i+1, line)
			}
		}
	}
}
