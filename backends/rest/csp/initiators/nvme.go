package initiators

import (
	"fmt"
	"path/filepath"
	"regexp"
)

// nvmeFile is nvme-cli's host NQN file, relative to the root.
const nvmeFile = "etc/nvme/hostnqn"

// nqnName matches an NVMe Qualified Name, loosely: nqn. and something without white space
// (nqn.2014-08.org.nvmexpress:uuid:<uuid>, or nqn.YYYY-MM.authority:id).
var nqnName = regexp.MustCompile(`(?i)^nqn\.[^\s]+$`)

// readNQNs reads the node's NVMe host NQN: the one line of hostnqn (comments and blank
// lines aside). Absent file: none, no error.
func readNQNs(root string) ([]string, error) {
	path := filepath.Join(root, filepath.FromSlash(nvmeFile))
	data, present, err := readConfigFile(path)
	if !present || err != nil {
		return nil, err
	}
	lines := contentLines(data)
	switch len(lines) {
	case 0:
		return nil, fmt.Errorf("%s: empty: no host NQN", path)
	case 1:
	default:
		return nil, fmt.Errorf("%s: %d lines: want one host NQN", path, len(lines))
	}
	v, err := stripComment(lines[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(v) > maxNameLen || !nqnName.MatchString(v) {
		return nil, fmt.Errorf("%s: %q is not an NVMe host NQN (nqn.…, at most %d bytes)", path, v, maxNameLen)
	}
	return []string{v}, nil
}
