package initiators

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// iscsiFile is open-iscsi's initiator name file, relative to the root.
const iscsiFile = "etc/iscsi/initiatorname.iscsi"

// iscsiName matches the three forms of an iSCSI name (RFC 3720 §3.2.6.3), loosely: iqn.
// with a date and a naming authority, eui. with 16 hex digits, naa. with 16 or 32.
var iscsiName = regexp.MustCompile(`(?i)^(iqn\.[0-9]{4}-[0-9]{2}\.[a-z0-9][^\s]*|eui\.[0-9a-f]{16}|naa\.([0-9a-f]{16}|[0-9a-f]{32}))$`)

// readIQNs reads the node's iSCSI initiator name from the InitiatorName= line of
// initiatorname.iscsi (Debian's with its comment header, RHEL's one line, SUSE's). Other
// keys (InitiatorAlias) are ignored. Absent file: none, no error.
func readIQNs(root string) ([]string, error) {
	path := filepath.Join(root, filepath.FromSlash(iscsiFile))
	data, present, err := readConfigFile(path)
	if !present || err != nil {
		return nil, err
	}
	var iqn string
	generate := false
	for _, l := range contentLines(data) {
		key, value, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch {
		case strings.EqualFold(key, "GenerateName"):
			generate = strings.EqualFold(value, "yes")
		case strings.EqualFold(key, "InitiatorName"):
			v, err := stripComment(value)
			if err != nil {
				return nil, fmt.Errorf("%s: InitiatorName: %v", path, err)
			}
			if len(v) > maxNameLen || !iscsiName.MatchString(v) {
				return nil, fmt.Errorf("%s: InitiatorName %q is not an iSCSI name (iqn.YYYY-MM.authority[:id], eui.<16 hex> or naa.<16 or 32 hex>, at most %d bytes)", path, v, maxNameLen)
			}
			if iqn != "" && iqn != v {
				return nil, fmt.Errorf("%s: two InitiatorName lines (%s, %s): which one the node uses is not clear", path, iqn, v)
			}
			iqn = v
		}
	}
	switch {
	case iqn != "":
		return []string{iqn}, nil
	case generate:
		return nil, fmt.Errorf("%s: no InitiatorName= line yet, only GenerateName=yes: start iscsid (or run iscsi-iname) once to generate it", path)
	default:
		return nil, fmt.Errorf("%s: no InitiatorName= line", path)
	}
}
