// Package shortname fits names into the limits of the systems they are stored in, stably:
// a name that fits is kept as it is; one that is too long, or has characters the system
// refuses, keeps what it can of its beginning and ends in "-" and a hash of the whole name.
// The same name always gives the same result (so a retried create finds what the first one
// made), and different names give different results (the hash carries 130 bits).
package shortname

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
	"unicode/utf8"
)

// hashLen is the length of the hash: 26 characters of base32 carry 130 bits.
const hashLen = 26

// Suffix is the length of what Fit appends to a name it shortens ("-" and the hash).
const Suffix = 1 + hashLen

// encoding spells the hash in lower-case letters and digits, which every system accepts.
var encoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// Fit returns name when it is at most max bytes and every character is allowed (nil allows
// everything); otherwise the allowed start of name (other characters become '-'), cut at a
// character boundary, then "-" and the hash of the whole name: at most max bytes, which
// must be more than Suffix.
func Fit(name string, max int, allowed func(rune) bool) string {
	if len(name) <= max && (allowed == nil || strings.IndexFunc(name, func(r rune) bool { return !allowed(r) }) < 0) {
		return name
	}
	clean := name
	if allowed != nil {
		clean = strings.Map(func(r rune) rune {
			if allowed(r) {
				return r
			}
			return '-'
		}, name)
	}
	keep := min(len(clean), max-Suffix)
	for keep > 0 && keep < len(clean) && !utf8.RuneStart(clean[keep]) {
		keep-- // never cut a character in two: names must stay valid UTF-8
	}
	sum := sha256.Sum256([]byte(name))
	return clean[:keep] + "-" + encoding.EncodeToString(sum[:])[:hashLen]
}
