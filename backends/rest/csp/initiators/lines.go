package initiators

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// maxFileSize bounds the configuration files read, so a wrong file (a device, a log) is an
// error rather than a long read.
const maxFileSize = 64 << 10

// maxNameLen is the longest iSCSI or NVMe name: 223 bytes (RFC 3720 §3.2.6.1; NVMe Base
// Specification, NQN).
const maxNameLen = 223

// contentLines returns the lines of a configuration file that say something: without a
// UTF-8 byte order mark, carriage returns and surrounding white space, and neither blank
// nor comments (#).
func contentLines(data []byte) []string {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxFileSize)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// stripComment removes a trailing " # comment" from a value, and reports an error if
// white space is left inside it: names never contain any.
func stripComment(v string) (string, error) {
	if i := strings.Index(v, "#"); i > 0 && strings.ContainsAny(v[i-1:i], " \t") {
		v = strings.TrimSpace(v[:i])
	}
	if strings.ContainsAny(v, " \t") {
		return "", fmt.Errorf("%q contains white space", v)
	}
	return v, nil
}

// readConfigFile reads a small file under root. A file that does not exist is reported as
// absent, without error; any other failure is an error naming the file.
func readConfigFile(path string) (data []byte, present bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, true, err // an *fs.PathError, which names the file
	}
	if len(data) > maxFileSize {
		return nil, true, fmt.Errorf("%s: larger than %d bytes: not an initiator file", path, maxFileSize)
	}
	return data, true, nil
}
