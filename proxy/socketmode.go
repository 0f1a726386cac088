package proxy

import (
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
)

// SocketMode is the permission of a Unix socket as configured, parsed one way wherever it is
// written: the socketMode key, CSIGW_SOCKET_MODE, and --socket-mode on serve and appliance.
// It is an octal string: "0660", "660" or "0o660", at most 0777 (permission bits only, no
// setuid, setgid or sticky bit); empty means DefaultSocketMode. Its zero value is
// DefaultSocketMode too, while "0000" is a socket no one but root may connect to.
//
// A bare YAML number is refused (UnmarshalMapstructure): a YAML 1.1 parser, and viper's
// (go.yaml.in/yaml/v3), reads socketMode: 0660 as octal (432), a YAML 1.2 one as decimal 660,
// and everyone reads 660 as decimal, so the mode would depend on the parser and on a leading
// zero; the unquoted 0660 once became mode 0432 (an owner who cannot connect, and every local
// user who can).
//
// It implements pflag.Value, encoding.TextUnmarshaler and mapstructure.Unmarshaler (by their
// method sets: proxy imports neither library).
type SocketMode struct {
	perm fs.FileMode
	set  bool // false: DefaultSocketMode
}

// Perm returns the permission bits the socket gets.
func (m SocketMode) Perm() fs.FileMode {
	if !m.set {
		return DefaultSocketMode
	}
	return m.perm
}

// String returns the mode as four octal digits ("0660"), the form flag help shows.
func (m SocketMode) String() string { return fmt.Sprintf("%04o", uint32(m.Perm())) }

// Type names the flag's value in help (--socket-mode mode).
func (SocketMode) Type() string { return "mode" }

// Set parses a flag's or a variable's value (see UnmarshalText).
func (m *SocketMode) Set(s string) error { return m.UnmarshalText([]byte(s)) }

// UnmarshalText parses "0660", "660" or "0o660"; empty is the default. On error m is unchanged.
func (m *SocketMode) UnmarshalText(text []byte) error {
	s := string(text)
	if s == "" {
		*m = SocketMode{}
		return nil
	}
	digits := s
	if rest, ok := strings.CutPrefix(strings.ToLower(s), "0o"); ok {
		digits = rest
	}
	n, err := strconv.ParseUint(digits, 8, 32)
	if err != nil {
		return fmt.Errorf("%q is not an octal mode such as \"0660\"", s)
	}
	if n > uint64(fs.ModePerm) {
		return fmt.Errorf("%q is above 0777: a socket mode has permission bits only, such as \"0660\"", s)
	}
	*m = SocketMode{perm: fs.FileMode(n), set: true}
	return nil
}

// UnmarshalMapstructure decodes the configuration file's value (mapstructure, under viper,
// calls it with the value as the YAML parser made it): a string as UnmarshalText does, and a
// bare number never.
func (m *SocketMode) UnmarshalMapstructure(v any) error {
	switch v := v.(type) {
	case string:
		return m.UnmarshalText([]byte(v))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return fmt.Errorf("a mode written as a bare number is refused (YAML read it as %v; "+
			"whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: %q",
			v, quotedModeFor(v))
	}
	return fmt.Errorf("%v is not an octal mode such as \"0660\"", v)
}

// quotedModeFor guesses the mode a bare YAML number was meant to be, for the error that
// refuses it: a number up to 0777 came from 0NNN or 0oNNN read as octal; a larger one whose
// decimal digits are octal, from NNN read as decimal. Otherwise it is the default's form.
func quotedModeFor(v any) string {
	f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > 777 {
		return SocketMode{}.String()
	}
	if n := uint64(f); n <= uint64(fs.ModePerm) {
		return fmt.Sprintf("%04o", n)
	}
	var asOctal SocketMode
	if asOctal.UnmarshalText([]byte(fmt.Sprint(v))) == nil {
		return asOctal.String()
	}
	return SocketMode{}.String()
}
