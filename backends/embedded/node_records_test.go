package embedded

import (
	"slices"
	"testing"
)

func TestNodeUseSame(t *testing.T) {
	withFlags := mountCap(snw)
	withFlags.GetMount().MountFlags = []string{"noatime"}
	base := nodeUse{capability: mountCap(snw)}
	tests := []struct {
		name  string
		other nodeUse
		same  bool
	}{
		{"identical", nodeUse{capability: mountCap(snw)}, true},
		{"read-only", nodeUse{capability: mountCap(snw), readonly: true}, false},
		{"access mode", nodeUse{capability: mountCap(snmw)}, false},
		{"access type", nodeUse{capability: blockCap(snw)}, false},
		{"mount flags", nodeUse{capability: withFlags}, false},
	}
	for _, tc := range tests {
		if got := base.same(tc.other); got != tc.same {
			t.Errorf("%s: same = %t, want %t", tc.name, got, tc.same)
		}
	}
	if got, want := (nodeUse{capability: blockCap(snro), readonly: true}).String(), "read-only a block device (SINGLE_NODE_READER_ONLY)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestNodeRecords(t *testing.T) {
	r := newNodeRecords()
	c := mountCap(snw)
	r.setStage("vol-1", "/s", nodeUse{capability: c})
	c.GetAccessMode().Mode = snmw // the record holds a copy
	got, ok := r.stage("vol-1", "/s")
	if !ok || got.capability.GetAccessMode().GetMode() != snw {
		t.Fatalf("stage record %v %t; want the SINGLE_NODE_WRITER use as recorded", got, ok)
	}
	r.setPublication("vol-1", "/t1", nodeUse{capability: mountCap(snw)})
	r.setPublication("vol-1", "/t2", nodeUse{capability: mountCap(snw)})
	staged, published := r.paths("vol-1")
	if !slices.Equal(staged, []string{"/s"}) || !slices.Equal(published, []string{"/t1", "/t2"}) {
		t.Errorf("paths = %v, %v; want [/s], [/t1 /t2]", staged, published)
	}
	if staged, published := r.paths("vol-2"); len(staged)+len(published) != 0 {
		t.Errorf("paths of an unknown volume = %v, %v; want none", staged, published)
	}
	r.dropPublication("vol-1", "/t1")
	if _, ok := r.publication("vol-1", "/t1"); ok {
		t.Error("dropped publication still recorded")
	}
	if _, ok := r.publication("vol-1", "/t2"); !ok {
		t.Error("the other publication went too")
	}
	r.dropPublication("vol-1", "/t2")
	r.dropStage("vol-1", "/s")
	r.dropStage("vol-1", "/never") // dropping what is not there is fine
	if len(r.staged) != 0 || len(r.published) != 0 {
		t.Errorf("records left: %v %v", r.staged, r.published)
	}
}
