package proxy

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Route sends the methods that match one of its patterns to a backend. A pattern is a full
// method glob in path.Match syntax ("/csi.v1.Node/*", "/csi.v1.Controller/CreateVolume"), or
// "*" for every method.
type Route struct {
	Methods []string `mapstructure:"methods"`
	Backend string   `mapstructure:"backend"`
}

// routeTable is the route list checked once at start: the first route that matches a method
// wins, and a method no route matches is UNIMPLEMENTED.
type routeTable []Route

// newRouteTable checks every pattern and that every route names a known backend.
func newRouteTable(routes []Route, known func(name string) bool) (routeTable, error) {
	if err := CheckRoutes(routes, known); err != nil {
		return nil, err
	}
	return routeTable(routes), nil
}

// CheckRoutes reports every route whose methods are empty or not patterns, or whose backend
// is not known, each error naming its key ("routes[1].backend: ...").
func CheckRoutes(routes []Route, known func(name string) bool) error {
	var errs []error
	for i, r := range routes {
		if len(r.Methods) == 0 {
			errs = append(errs, fmt.Errorf("routes[%d].methods: empty; use [\"*\"] for every method", i))
		}
		for _, p := range r.Methods {
			if _, err := path.Match(p, "/x/y"); err != nil {
				errs = append(errs, fmt.Errorf("routes[%d].methods: bad pattern %q: %v", i, p, err))
			}
		}
		if !known(r.Backend) {
			errs = append(errs, fmt.Errorf("routes[%d].backend: no backend named %q", i, r.Backend))
		}
	}
	return errors.Join(errs...)
}

// match returns the backend for a full method name, or "" when no route matches. A CSI v0
// method is routed as its v1 counterpart ("/csi.v0.Node/NodeStageVolume" as
// "/csi.v1.Node/NodeStageVolume"), so that routes written for v1 serve old callers the same
// way (the backend translates: backends/translate), unless a route written for v0 (a
// pattern starting "/csi.v0.") matches it first.
func (t routeTable) match(method string) string {
	rest, v0 := strings.CutPrefix(method, v0MethodPrefix)
	if !v0 {
		return t.matchExactly(method)
	}
	for _, r := range t {
		for _, p := range r.Methods {
			if ok, _ := path.Match(p, method); ok && strings.HasPrefix(p, v0MethodPrefix) {
				return r.Backend
			}
		}
	}
	return t.matchExactly("/csi.v1." + rest)
}

// v0MethodPrefix starts every CSI v0 method's full name.
const v0MethodPrefix = "/csi.v0."

// matchExactly returns the backend of the first route matching method itself.
func (t routeTable) matchExactly(method string) string {
	for _, r := range t {
		for _, p := range r.Methods {
			if p == "*" {
				return r.Backend
			}
			if ok, _ := path.Match(p, method); ok {
				return r.Backend
			}
		}
	}
	return ""
}
