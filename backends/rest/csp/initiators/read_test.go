package initiators

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadInitiatorsFixtures reads each fixture tree of testdata/ as a node's root.
func TestReadInitiatorsFixtures(t *testing.T) {
	tests := []struct {
		root string
		want Node
	}{
		{"iscsi-debian", Node{IQNs: []string{"iqn.1993-08.org.debian:01:9d3a8c1b2e4f"}}},
		{"nvme-only", Node{NQNs: []string{"nqn.2014-08.org.nvmexpress:uuid:4c4c4544-0035-4810-8058-b3c04f4d3432"}}},
		// host3, host4 (0x0: skipped), host11: in host number order, lower case.
		{"fc-two-hbas", Node{WWPNs: []string{"10:00:00:90:fa:1b:2c:3d", "10:00:00:90:fa:1b:2c:3e"}}},
		{"all", Node{
			IQNs:  []string{"iqn.1994-05.com.redhat:5b8e6a1c3d2f"},
			WWPNs: []string{"50:01:43:80:12:34:56:78"},
			NQNs:  []string{"nqn.2014-08.org.nvmexpress:uuid:0b6f0c2e-7d1a-4e8b-9a51-3c2d1e0f9a87"},
		}},
		{"none", Node{}},
	}
	for _, tt := range tests {
		t.Run(tt.root, func(t *testing.T) {
			got, err := Read(filepath.Join("testdata", tt.root))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Read = %+v, want %+v", got, tt.want)
			}
			if Empty(got) != (tt.root == "none") {
				t.Errorf("Empty(%+v) = %v", got, Empty(got))
			}
		})
	}
}

// TestReadInitiatorsMalformedFixture: an initiatorname.iscsi without InitiatorName= is an
// error that names the file.
func TestReadInitiatorsMalformedFixture(t *testing.T) {
	root := filepath.Join("testdata", "malformed-iscsi")
	_, err := Read(root)
	file := filepath.Join(root, "etc", "iscsi", "initiatorname.iscsi")
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "no InitiatorName= line") {
		t.Fatalf("Read = %v, want an error naming %s and the missing line", err, file)
	}
}

// writeTree makes a root with files (slash paths relative to it) and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestReadInitiatorsFormats: the variants of the files that Read accepts.
func TestReadInitiatorsFormats(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  Node
	}{
		{"iscsi CRLF, BOM, spaces around =", map[string]string{
			iscsiFile: "\ufeff# c\r\n\r\nInitiatorName = iqn.2001-04.com.example:node-1\r\n",
		}, Node{IQNs: []string{"iqn.2001-04.com.example:node-1"}}},
		{"iscsi with alias and trailing comment", map[string]string{
			iscsiFile: "InitiatorName=iqn.1996-04.de.suse:01:abc # set by yast\nInitiatorAlias=node1\n",
		}, Node{IQNs: []string{"iqn.1996-04.de.suse:01:abc"}}},
		{"iscsi generated after GenerateName", map[string]string{
			iscsiFile: "GenerateName=yes\nInitiatorName=iqn.1993-08.org.debian:01:1\n",
		}, Node{IQNs: []string{"iqn.1993-08.org.debian:01:1"}}},
		{"iscsi eui", map[string]string{iscsiFile: "InitiatorName=eui.02004567A425678D\n"},
			Node{IQNs: []string{"eui.02004567A425678D"}}},
		{"iscsi naa 32", map[string]string{iscsiFile: "InitiatorName=naa.52004567BA64678D0123456789ABCDEF\n"},
			Node{IQNs: []string{"naa.52004567BA64678D0123456789ABCDEF"}}},
		{"iscsi same name twice", map[string]string{iscsiFile: "InitiatorName=iqn.2001-04.com.example:a\nInitiatorName=iqn.2001-04.com.example:a\n"},
			Node{IQNs: []string{"iqn.2001-04.com.example:a"}}},
		{"nvme without newline, with comment", map[string]string{nvmeFile: "# host NQN\nnqn.2014-08.com.example:host-1"},
			Node{NQNs: []string{"nqn.2014-08.com.example:host-1"}}},
		{"fc port without 0x, short, unreadable port skipped", map[string]string{
			"sys/class/fc_host/host0/port_name":            "21000024ff7a0b1c\n",
			"sys/class/fc_host/host1/port_name":            "0xabc\n",
			"sys/class/fc_host/host2/port_name/not-a-file": "",
			"sys/class/fc_host/host3/port_state":           "Online\n",
			"sys/class/fc_host/other/port_name":            "0x1111111111111111\n",
		}, Node{WWPNs: []string{"21:00:00:24:ff:7a:0b:1c", "00:00:00:00:00:00:0a:bc"}}},
		{"fc same WWPN twice", map[string]string{
			"sys/class/fc_host/host0/port_name": "0x10000090fa1b2c3d\n",
			"sys/class/fc_host/host1/port_name": "0x10000090FA1B2C3D\n",
		}, Node{WWPNs: []string{"10:00:00:90:fa:1b:2c:3d"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(writeTree(t, tt.files))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Read = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestReadInitiatorsErrors: a file that is there but wrong is an error naming it.
func TestReadInitiatorsErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		file  string // relative to the root
		msg   string
	}{
		{"iscsi empty", map[string]string{iscsiFile: ""}, iscsiFile, "no InitiatorName= line"},
		{"iscsi not generated", map[string]string{iscsiFile: "GenerateName=yes\n"}, iscsiFile, "GenerateName=yes"},
		{"iscsi not a name", map[string]string{iscsiFile: "InitiatorName=node-1\n"}, iscsiFile, "not an iSCSI name"},
		{"iscsi iqn without date", map[string]string{iscsiFile: "InitiatorName=iqn.com.example\n"}, iscsiFile, "not an iSCSI name"},
		{"iscsi empty name", map[string]string{iscsiFile: "InitiatorName=\n"}, iscsiFile, "not an iSCSI name"},
		{"iscsi space inside", map[string]string{iscsiFile: "InitiatorName=iqn.2001-04.com.example:a b\n"}, iscsiFile, "white space"},
		{"iscsi too long", map[string]string{iscsiFile: "InitiatorName=iqn.2001-04.com.example:" + strings.Repeat("a", 200) + "\n"}, iscsiFile, "223"},
		{"iscsi two names", map[string]string{iscsiFile: "InitiatorName=iqn.2001-04.com.example:a\nInitiatorName=iqn.2001-04.com.example:b\n"}, iscsiFile, "two InitiatorName"},
		{"iscsi is a directory", map[string]string{iscsiFile + "/x": ""}, iscsiFile, "directory"},
		{"nvme empty", map[string]string{nvmeFile: "\n# nothing\n"}, nvmeFile, "empty"},
		{"nvme not an nqn", map[string]string{nvmeFile: "4c4c4544-0035-4810-8058-b3c04f4d3432\n"}, nvmeFile, "not an NVMe host NQN"},
		{"nvme two lines", map[string]string{nvmeFile: "nqn.2014-08.com.example:a\nnqn.2014-08.com.example:b\n"}, nvmeFile, "2 lines"},
		{"fc not hex", map[string]string{"sys/class/fc_host/host0/port_name": "0xzz\n"}, "sys/class/fc_host/host0/port_name", "not a WWPN"},
		{"fc too long", map[string]string{"sys/class/fc_host/host0/port_name": "0x10000090fa1b2c3d00\n"}, "sys/class/fc_host/host0/port_name", "not a WWPN"},
		{"fc empty", map[string]string{"sys/class/fc_host/host0/port_name": "\n"}, "sys/class/fc_host/host0/port_name", "not a WWPN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			got, err := Read(root)
			file := filepath.Join(root, filepath.FromSlash(tt.file))
			if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Read = %+v, %v; want an error naming %s with %q", got, err, file, tt.msg)
			}
		})
	}
}

// TestReadInitiatorsAllErrors: every wrong file is named, not only the first.
func TestReadInitiatorsAllErrors(t *testing.T) {
	root := writeTree(t, map[string]string{iscsiFile: "x\n", nvmeFile: "x\n"})
	_, err := Read(root)
	if err == nil || !strings.Contains(err.Error(), "initiatorname.iscsi") || !strings.Contains(err.Error(), "hostnqn") {
		t.Fatalf("Read = %v, want errors naming both files", err)
	}
}

// TestReadInitiatorsRoot: a root that is missing or not a directory is an error (a
// mistyped --root), not a node without initiators.
func TestReadInitiatorsRoot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(dir, "missing"), file} {
		if _, err := Read(root); err == nil || !strings.Contains(err.Error(), root) {
			t.Errorf("Read(%s) = %v, want an error naming it", root, err)
		}
	}
}

// TestParseWWPNInitiators: sysfs's form to the colon form.
func TestParseWWPNInitiators(t *testing.T) {
	for in, want := range map[string]string{
		"0x10000090fa1b2c3d\n": "10:00:00:90:fa:1b:2c:3d",
		"0X10000090FA1B2C3D":   "10:00:00:90:fa:1b:2c:3d",
		"0x0":                  "",
		"0x0000000000000000":   "",
		"0x1":                  "00:00:00:00:00:00:00:01",
	} {
		if got, err := parseWWPN(in); err != nil || got != want {
			t.Errorf("parseWWPN(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0x", "0x+1", "-1", "0x1_0", "0x10000090fa1b2c3d0"} {
		if got, err := parseWWPN(in); err == nil {
			t.Errorf("parseWWPN(%q) = %q, want an error", in, got)
		}
	}
}
