package backends

import (
	"strings"
	"unicode"
)

// OneLine is how a backend makes text it did not write (an appliance's error body, a
// transport error) fit one line of a message: invalid UTF-8 becomes U+FFFD, control
// characters and line or paragraph separators become spaces, and runs of white space
// collapse to one space, with none at either end.
//
// The gateway scrubs the request's secret values from messages after the backend has done
// this, so its scrubber (redact.Scrubber) also looks for OneLine of every secret value: a
// secret with a trailing newline, a CRLF, a tab or several lines still matches once a
// backend has flattened it.
func OneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
