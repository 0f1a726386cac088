// Package choice reads a configuration key whose value is one of a few words (a validation
// mode, a CSI version): case and surrounding spaces do not matter, an empty value is the
// key's default, and any other word is refused with the list of those it may be.
package choice

import (
	"fmt"
	"strings"
)

// Parse reads s as one of allowed; "" is def. what names the key in the error ("CSI
// version").
func Parse[T ~string](s, what string, def T, allowed ...T) (T, error) {
	v := T(strings.ToLower(strings.TrimSpace(s)))
	if v == "" {
		return def, nil
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown %s %q; use %s", what, s, list(allowed))
}

// Set stores in dst what parse reads of text, and leaves dst as it is on an error: the
// body of an UnmarshalText.
func Set[T any](dst *T, text []byte, parse func(string) (T, error)) error {
	v, err := parse(string(text))
	if err == nil {
		*dst = v
	}
	return err
}

// list is "a, b or c".
func list[T ~string](words []T) string {
	s := make([]string, len(words))
	for i, w := range words {
		s[i] = string(w)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
