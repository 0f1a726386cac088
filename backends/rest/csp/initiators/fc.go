package initiators

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// fcDir is the kernel's list of Fibre Channel HBA ports, relative to the root: one
// hostN directory (a symbolic link in sysfs) per port, with its WWPN in port_name.
const fcDir = "sys/class/fc_host"

// fcGlob names the files read, for messages.
const fcGlob = fcDir + "/host*/port_name"

// readWWPNs reads the WWPN of each FC HBA port, in the order of the SCSI host numbers, as
// lower-case colon-separated bytes (10:00:00:90:fa:1b:2c:3d). A port whose port_name cannot
// be read (an HBA going away, a port without one) or is 0 (not set up) is skipped; one
// that is not a hexadecimal number is an error. No fc_host directory: none, no error.
func readWWPNs(root string) ([]string, error) {
	dir := filepath.Join(root, filepath.FromSlash(fcDir))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	type port struct {
		n    int
		name string
	}
	var ports []port
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), "host")
		n, err := strconv.Atoi(digits)
		if !ok || err != nil || n < 0 {
			continue
		}
		ports = append(ports, port{n, e.Name()})
	}
	slices.SortFunc(ports, func(a, b port) int { return a.n - b.n })

	var wwpns []string
	for _, p := range ports {
		path := filepath.Join(dir, p.name, "port_name")
		data, err := os.ReadFile(path)
		if err != nil {
			continue // unreadable: the port is going away or has no name
		}
		wwpn, err := parseWWPN(string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if wwpn != "" {
			wwpns = appendUnique(wwpns, wwpn)
		}
	}
	return wwpns, nil
}

// parseWWPN turns sysfs's 0x10000090fa1b2c3d into 10:00:00:90:fa:1b:2c:3d. It returns ""
// for 0, a port without a name.
func parseWWPN(s string) (string, error) {
	s = strings.TrimSpace(s)
	hex := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if hex == "" || len(hex) > 16 {
		return "", fmt.Errorf("%q is not a WWPN (0x and up to 16 hexadecimal digits)", s)
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return "", fmt.Errorf("%q is not a WWPN (0x and up to 16 hexadecimal digits)", s)
	}
	if v == 0 {
		return "", nil
	}
	b := fmt.Sprintf("%016x", v)
	var out strings.Builder
	for i := 0; i < len(b); i += 2 {
		if i > 0 {
			out.WriteByte(':')
		}
		out.WriteString(b[i : i+2])
	}
	return out.String(), nil
}
