package proxy

import (
	"slices"
	"testing"
)

func TestRouteTableMatch(t *testing.T) {
	nodeFirst := []Route{
		{Methods: []string{"/csi.v1.Node/*"}, Backend: "node"},
		{Methods: []string{"/csi.v1.Controller/CreateVolume", "/csi.v1.Controller/DeleteVolume"}, Backend: "volumes"},
		{Methods: []string{"*"}, Backend: "array"},
	}
	catchAllFirst := []Route{
		{Methods: []string{"*"}, Backend: "array"},
		{Methods: []string{"/csi.v1.Node/*"}, Backend: "node"},
	}
	noCatchAll := []Route{
		{Methods: []string{"/csi.v1.Node/*", "/csi.v1.*/Probe"}, Backend: "node"},
	}
	v0Routed := []Route{
		{Methods: []string{"/csi.v1.Node/*"}, Backend: "node"},
		{Methods: []string{"/csi.v0.Node/*"}, Backend: "legacy"},
	}
	tests := []struct {
		name   string
		routes []Route
		method string
		want   string
	}{
		{"glob matches its service", nodeFirst, "/csi.v1.Node/NodeStageVolume", "node"},
		{"exact name", nodeFirst, "/csi.v1.Controller/DeleteVolume", "volumes"},
		{"second pattern of a route", nodeFirst, "/csi.v1.Controller/CreateVolume", "volumes"},
		{"star matches the rest", nodeFirst, "/csi.v1.Controller/ListVolumes", "array"},
		{"star matches unknown services", nodeFirst, "/grpc.health.v1.Health/Check", "array"},
		{"star matches odd names", nodeFirst, "/a/b/c", "array"},
		{"glob does not match a longer service", nodeFirst, "/csi.v1.NodeX/NodeStageVolume", "array"},
		{"first match wins over a later glob", catchAllFirst, "/csi.v1.Node/NodeStageVolume", "array"},
		{"glob in the service part", noCatchAll, "/csi.v1.Identity/Probe", "node"},
		{"no match", noCatchAll, "/csi.v1.Controller/CreateVolume", ""},
		{"glob does not cross a slash", noCatchAll, "/csi.v1.Node/x/y", ""},
		{"empty table", nil, "/csi.v1.Node/NodeStageVolume", ""},
		{"v0 routed as its v1 counterpart", nodeFirst, "/csi.v0.Node/NodeStageVolume", "node"},
		{"v0 counterpart by exact name", nodeFirst, "/csi.v0.Controller/DeleteVolume", "volumes"},
		{"v0 counterpart to the catch-all", nodeFirst, "/csi.v0.Controller/ListVolumes", "array"},
		{"v0 counterpart unrouted", noCatchAll, "/csi.v0.Controller/CreateVolume", ""},
		{"v0 counterpart by a glob", noCatchAll, "/csi.v0.Identity/Probe", "node"},
		{"a v0 route first", v0Routed, "/csi.v0.Node/NodeStageVolume", "legacy"},
		{"a v0 route only for v0", v0Routed, "/csi.v1.Node/NodeStageVolume", "node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := newRouteTable(tt.routes, func(string) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			if got := rt.match(tt.method); got != tt.want {
				t.Errorf("match(%q) = %q, want %q", tt.method, got, tt.want)
			}
		})
	}
}

func TestNewRouteTableRefuses(t *testing.T) {
	known := func(name string) bool { return slices.Contains([]string{"array", "node"}, name) }
	tests := []struct {
		name    string
		routes  []Route
		wantErr string
	}{
		{"bad pattern", []Route{{Methods: []string{"*"}, Backend: "array"}, {Methods: []string{"/csi.v1.Node/*", "/csi.v1.Node/["}, Backend: "node"}},
			`routes[1].methods: bad pattern "/csi.v1.Node/[": syntax error in pattern`},
		{"bad pattern that would not match anyway", []Route{{Methods: []string{`/zzz/\`}, Backend: "array"}},
			`routes[0].methods: bad pattern "/zzz/\\": syntax error in pattern`},
		{"unknown backend", []Route{{Methods: []string{"/csi.v1.Node/*"}, Backend: "node"}, {Methods: []string{"*"}, Backend: "nope"}},
			`routes[1].backend: no backend named "nope"`},
		{"missing backend", []Route{{Methods: []string{"*"}}},
			`routes[0].backend: no backend named ""`},
		{"empty methods", []Route{{Methods: []string{}, Backend: "array"}},
			`routes[0].methods: empty; use ["*"] for every method`},
		{"nil methods", []Route{{Methods: []string{"*"}, Backend: "array"}, {Backend: "node"}},
			`routes[1].methods: empty; use ["*"] for every method`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := newRouteTable(tt.routes, known)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("newRouteTable = %v, %v; want error %q", rt, err, tt.wantErr)
			}
			if rt != nil {
				t.Errorf("newRouteTable returned a table with its error: %v", rt)
			}
		})
	}
}
