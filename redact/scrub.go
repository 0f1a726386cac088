package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/csi-gateway/csi-gateway/backends"
)

// ScrubbedValue replaces each run of secret bytes in text passed through Scrubber.Scrub.
const ScrubbedValue = "***"

// minScrubLen is the shortest value a Scrubber removes. Shorter values ("1", "rw", "abc") occur
// in almost any text, so scrubbing them would destroy error messages and log lines while
// protecting little: a secret of three bytes is guessable anyway. Such values are still
// removed from messages by schema (Redactor.Redact); only free-text scrubbing skips them.
const minScrubLen = 4

// minFragmentLen is the shortest part of a secret value (one of its lines or words) that a
// Scrubber removes on its own. A part is what an appliance echoes line by line or word by
// word; parts shorter than this ("-----", "KEY", "==") are ordinary text, so removing them
// would garble messages, and on their own they give away little. Whole values, and their
// flattened and trimmed forms, are removed down to minScrubLen.
const minFragmentLen = 8

// Scrubber removes the secret values of one call from free text the gateway emits about it:
// log lines, span attributes, error messages from backends. Every form of a value is removed,
// wherever it came from (a driver, an appliance's error body, the gateway itself):
//
//   - the value as sent;
//   - the value as a backend or appliance reformats it (derivedForms): flattened to one line
//     (backends.OneLine, as the rest backends clean an appliance's words before the
//     gateway sees them: a trailing newline, a CRLF or a tab becomes a space or nothing),
//     trimmed, and, for a value of several lines or words (a PEM key), each line and each
//     word of at least minFragmentLen bytes;
//   - each of those encoded as a backend is likely to echo it: base64 (standard and URL
//     alphabets, padded or not), URL query and path escaping, and JSON string escaping.
//
// A value embedded in a larger encoded blob (say base64("user:password")), or cut short by
// its echoer, cannot be recognised and is not removed.
//
// A Scrubber is immutable and safe for concurrent use. A nil *Scrubber scrubs nothing.
type Scrubber struct {
	// patterns are distinct, each at least minScrubLen bytes, ordered by first byte and,
	// within a first byte, longest first; patterns[group[c]:group[c+1]] start with byte c.
	patterns []string
	group    [257]uint32
	hasStar  bool // a pattern contains '*', so a replacement can form a new occurrence
}

// NewScrubber returns a Scrubber for values (typically Redactor.SecretValues of a request).
// Values shorter than 4 bytes are ignored (see minScrubLen), and so are lines and words of a
// value shorter than 8 (see minFragmentLen). It never returns nil.
func NewScrubber(values []string) *Scrubber {
	sc := &Scrubber{}
	forms := make([]string, 0, maxEncodedForms*len(values))
	for _, v := range values {
		if len(v) >= minScrubLen {
			forms = appendEncodedForms(forms, v)
			for _, d := range derivedForms(v) {
				forms = appendEncodedForms(forms, d)
			}
		}
	}
	sc.patterns = slices.DeleteFunc(forms, func(p string) bool { return len(p) < minScrubLen })
	for _, p := range sc.patterns {
		sc.hasStar = sc.hasStar || strings.IndexByte(p, '*') >= 0
	}
	// Longest first: at any position the longest value wins, so a secret containing another
	// is removed whole.
	slices.SortFunc(sc.patterns, func(a, b string) int {
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	sc.patterns = slices.Compact(sc.patterns)
	for _, p := range sc.patterns {
		sc.group[int(p[0])+1]++
	}
	for c := 1; c < len(sc.group); c++ {
		sc.group[c] += sc.group[c-1]
	}
	return sc
}

// derivedForms returns the forms other than itself that v takes once reformatted: OneLine(v),
// v trimmed, and each line and word of v (trimmed, flattened) of at least minFragmentLen
// bytes; nil for a value of one word of printable ASCII, which has none.
func derivedForms(v string) []string {
	plain := true
	for i := 0; i < len(v) && plain; i++ {
		plain = v[i] > ' ' && v[i] < 0x7f
	}
	if plain {
		return nil
	}
	var out []string
	add := func(f string, min int) {
		if len(f) >= min && f != v && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	flat := backends.OneLine(v)
	add(flat, minScrubLen)
	add(strings.TrimSpace(v), minScrubLen)
	for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
		add(strings.TrimSpace(line), minFragmentLen)
		add(backends.OneLine(line), minFragmentLen)
	}
	for _, word := range strings.Fields(flat) {
		add(word, minFragmentLen)
	}
	return out
}

// maxEncodedForms is how many forms appendEncodedForms appends at most.
const maxEncodedForms = 9

// appendEncodedForms appends v and the forms in which it may appear in a backend's text.
func appendEncodedForms(forms []string, v string) []string {
	// Padded base64 wins where present (longest first); the unpadded form catches the rest.
	std := base64.StdEncoding.EncodeToString([]byte(v))
	forms = append(forms, v, std, strings.TrimRight(std, "="), url.QueryEscape(v), url.PathEscape(v))
	if strings.ContainsAny(std, "+/") {
		u := strings.Map(func(r rune) rune {
			switch r {
			case '+':
				return '-'
			case '/':
				return '_'
			}
			return r
		}, std)
		forms = append(forms, u, strings.TrimRight(u, "="))
	}
	if needsJSONEscape(v) {
		// encoding/json escapes <, > and &; protojson and most other encoders do not.
		for _, html := range []bool{true, false} {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			if enc.Encode(v) == nil {
				forms = append(forms, strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n"), `"`)[1:])
			}
		}
	}
	return forms
}

// needsJSONEscape reports whether a JSON encoder may write v otherwise than as itself: it
// holds a control character, ", \, <, >, & (encoding/json escapes the last three), invalid
// UTF-8, or U+2028 or U+2029 (which encoding/json escapes too).
func needsJSONEscape(v string) bool {
	ascii := true
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			return true
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if ascii {
		return false
	}
	return !utf8.ValidString(v) || strings.Contains(v, "\u2028") || strings.Contains(v, "\u2029")
}

// Scrub returns s with every byte that belongs to an occurrence of a secret value (or of one
// of its encodings) removed, each maximal run of such bytes replaced by ScrubbedValue; the
// result contains no occurrence of any scrubbed value. When s contains none, s itself is
// returned without allocating.
func (sc *Scrubber) Scrub(s string) string {
	if sc == nil || len(sc.patterns) == 0 {
		return s
	}
	i, n := sc.next(s, 0)
	for n > 0 {
		s = sc.replace(s, i, n)
		if !sc.hasStar {
			// Every occurrence was covered, and a new one would have to include a '*' of an
			// inserted ScrubbedValue.
			return s
		}
		// Each pass shortens s (patterns are longer than ScrubbedValue), so this ends.
		i, n = sc.next(s, 0)
	}
	return s
}

// replace returns s with its matches replaced, given the first one: n bytes at i.
func (sc *Scrubber) replace(s string, i, n int) string {
	var b strings.Builder
	b.Grow(len(s))
	last := 0 // s[last:] is not written yet
	for n > 0 {
		b.WriteString(s[last:i])
		b.WriteString(ScrubbedValue)
		end := i + n
		// Matches that start inside the run, or right where it ends, extend it: overlapping
		// secrets are removed whole, not just the one that started first.
		for j := i + 1; j <= end && j < len(s); j++ {
			if m := sc.longestAt(s, j); j+m > end {
				end = j + m
			}
		}
		last = end
		i, n = sc.next(s, end)
	}
	b.WriteString(s[last:])
	return b.String()
}

// next returns the first position at or after from where a pattern starts, and the length of
// the longest pattern there; n is 0 when there is none.
func (sc *Scrubber) next(s string, from int) (i, n int) {
	for i = from; i < len(s); i++ {
		// Inline first-byte filter: most bytes start no pattern.
		if c := s[i]; sc.group[c] == sc.group[int(c)+1] {
			continue
		}
		if n = sc.longestAt(s, i); n > 0 {
			return i, n
		}
	}
	return -1, 0
}

// longestAt returns the length of the longest pattern that starts at s[i], or 0.
func (sc *Scrubber) longestAt(s string, i int) int {
	c := s[i]
	for _, p := range sc.patterns[sc.group[c]:sc.group[int(c)+1]] {
		if strings.HasPrefix(s[i:], p) {
			return len(p)
		}
	}
	return 0
}
