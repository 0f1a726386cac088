package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// mount is one line of /proc/self/mountinfo.
type mount struct {
	id, point, root, fstype, source string
}

func (m mount) key() string { return m.id + " " + m.point }

func (m mount) String() string {
	return fmt.Sprintf("mount %s (%s %s, root %s)", m.point, m.fstype, m.source, m.root)
}

func (h host) readMounts() ([]mount, error) {
	f, err := os.Open(h.path("proc/self/mountinfo"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if m, ok := parseMountinfo(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseMountinfo reads "id parent major:minor root point options [optional…] - fstype source superoptions".
func parseMountinfo(line string) (mount, bool) {
	before, after, ok := strings.Cut(line, " - ")
	if !ok {
		return mount{}, false
	}
	f, g := strings.Fields(before), strings.Fields(after)
	if len(f) < 6 || len(g) < 2 {
		return mount{}, false
	}
	return mount{id: f[0], root: unescapeOctal(f[3]), point: unescapeOctal(f[4]), fstype: g[0], source: unescapeOctal(g[1])}, true
}

// unescapeOctal undoes the kernel's \040-style escapes of space, tab, newline and backslash.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
