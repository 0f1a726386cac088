package auth

import (
	"fmt"
	"path"
	"strings"
)

// MethodAllowList admits calls to the methods that match one of its patterns: full method
// globs in path.Match syntax, such as "/csi.v1.Identity/*" or
// "/csi.v1.Controller/CreateVolume". An empty list admits every method.
type MethodAllowList struct {
	// Key names the list in refusals, e.g. "listeners[1].methods".
	Key      string
	Patterns []string
}

// Validate returns an error naming the first pattern that is not a valid glob.
func (a MethodAllowList) Validate() error {
	for _, p := range a.Patterns {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("%q is not a full method pattern such as %q", p, "/csi.v1.Controller/*")
		}
		if _, err := path.Match(p, "/x/y"); err != nil {
			return fmt.Errorf("bad pattern %q: %v", p, err)
		}
	}
	return nil
}

// Allow returns nil when method may be called, or an error saying why not.
func (a MethodAllowList) Allow(method string) error {
	if len(a.Patterns) == 0 {
		return nil
	}
	for _, p := range a.Patterns {
		if ok, _ := path.Match(p, method); ok {
			return nil
		}
	}
	return fmt.Errorf("%s is not allowed on this listener (%s: %s)", method, a.Key, strings.Join(a.Patterns, ", "))
}
