package proxy

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestSocketModeText: every written form of a mode, as UnmarshalText (the file's strings,
// CSIGW_SOCKET_MODE and both --socket-mode flags) takes it; the accepted ones are the mode a
// socket really gets.
func TestSocketModeText(t *testing.T) {
	for _, tc := range []struct {
		text    string
		want    fs.FileMode
		wantErr string
	}{
		{"0660", 0o660, ""},
		{"660", 0o660, ""},
		{"0o660", 0o660, ""},
		{"0O600", 0o600, ""},
		{"0600", 0o600, ""},
		{"0777", 0o777, ""},
		{"0000", 0, ""},
		{"", DefaultSocketMode, ""},
		{"0999", 0, `"0999" is not an octal mode such as "0660"`},
		{"1777", 0, `"1777" is above 0777: a socket mode has permission bits only, such as "0660"`},
		{"01000", 0, `"01000" is above 0777: a socket mode has permission bits only, such as "0660"`},
		{"rw-rw----", 0, `"rw-rw----" is not an octal mode such as "0660"`},
		{"0o", 0, `"0o" is not an octal mode such as "0660"`},
		{"0x1b0", 0, `"0x1b0" is not an octal mode such as "0660"`},
		{"-660", 0, `"-660" is not an octal mode such as "0660"`},
		{" 0660", 0, `" 0660" is not an octal mode such as "0660"`},
		{"0_660", 0, `"0_660" is not an octal mode such as "0660"`},
	} {
		t.Run(tc.text, func(t *testing.T) {
			m := SocketMode{perm: 0o123, set: true}
			err := m.UnmarshalText([]byte(tc.text))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v\nwant  %s", err, tc.wantErr)
				}
				if m.Perm() != 0o123 {
					t.Errorf("a refused text changed the mode to %v", m.Perm())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Perm() != tc.want {
				t.Fatalf("Perm %04o, want %04o", m.Perm(), tc.want)
			}
			path := filepath.Join(t.TempDir(), "csi.sock")
			l, err := Listen(listenUnixEndpoint(path), m.Perm())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.want {
				t.Errorf("the socket's mode on disk is %04o, want %04o", fi.Mode().Perm(), tc.want)
			}
		})
	}
}

// TestSocketModeZeroAndString: the zero value is the default, String is four octal digits
// (what flag help shows), and "0000" stays 0000 rather than falling back to the default.
func TestSocketModeZeroAndString(t *testing.T) {
	var m SocketMode
	if m.Perm() != DefaultSocketMode || m.String() != "0660" {
		t.Errorf("zero value: Perm %v String %q, want 0660", m.Perm(), m.String())
	}
	if err := m.Set("0000"); err != nil || m.Perm() != 0 || m.String() != "0000" {
		t.Errorf("0000: %v, Perm %v String %q", err, m.Perm(), m.String())
	}
	if err := m.Set("0o7"); err != nil || m.String() != "0007" {
		t.Errorf("0o7: %v, String %q", err, m.String())
	}
	if m.Type() != "mode" {
		t.Errorf("Type %q", m.Type())
	}
}

// TestSocketModeBareNumber: what a YAML parser hands over for an unquoted mode is refused with
// the quoted form the number most likely meant.
func TestSocketModeBareNumber(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"0660 read as octal", 432, `a mode written as a bare number is refused (YAML read it as 432; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: "0660"`},
		{"0600 read as octal", 384, `a mode written as a bare number is refused (YAML read it as 384; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: "0600"`},
		{"660 read as decimal", 660, `a mode written as a bare number is refused (YAML read it as 660; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: "0660"`},
		{"uint64", uint64(420), `a mode written as a bare number is refused (YAML read it as 420; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: "0644"`},
		{"0999 read as a float", 999.0, `a mode written as a bare number is refused (YAML read it as 999; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: "0660"`},
		{"1777", 1777, `a mode written as a bare number is refused (YAML read it as 1777; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: "0660"`},
		{"negative", -1, `a mode written as a bare number is refused (YAML read it as -1; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: "0660"`},
		{"fraction", 6.6, `a mode written as a bare number is refused (YAML read it as 6.6; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: "0660"`},
		{"bool", true, `true is not an octal mode such as "0660"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m SocketMode
			err := m.UnmarshalMapstructure(tc.v)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v\nwant  %s", err, tc.want)
			}
		})
	}
	var m SocketMode
	if err := m.UnmarshalMapstructure("0o640"); err != nil || m.Perm() != 0o640 {
		t.Errorf("a string: %v, %v", err, m.Perm())
	}
}
