package auth

import (
	"context"
	"strings"
	"testing"
)

func TestUIDAllowList(t *testing.T) {
	alice := Identity{Kind: "unix", UID: 1000, GID: 100}
	root := Identity{Kind: "unix", UID: 0, GID: 0}
	anon := Identity{Kind: "anonymous"}
	for _, tc := range []struct {
		name string
		list UIDAllowList
		id   Identity
		want string // "" = admitted, else a fragment of the refusal
	}{
		{"empty list admits everyone", UIDAllowList{}, alice, ""},
		{"empty list admits anonymous", UIDAllowList{}, anon, ""},
		{"listed uid", UIDAllowList{UIDs: []uint32{0, 1000}}, alice, ""},
		{"listed gid", UIDAllowList{GIDs: []uint32{100}}, alice, ""},
		{"unlisted", UIDAllowList{UIDs: []uint32{0}}, alice, "uid 1000 (gid 100) is not in"},
		{"anonymous refused by a list", UIDAllowList{UIDs: []uint32{0}}, anon, "credentials are unknown"},
		{"root listed", UIDAllowList{UIDs: []uint32{0}}, root, ""},
	} {
		err := tc.list.Authorize(tc.id)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestIdentityContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Error("an empty context carries no identity")
	}
	id := Identity{Kind: "unix", UID: 7, GID: 8, PID: 9}
	got, ok := FromContext(NewContext(context.Background(), id))
	if !ok || got != id || got.String() != "uid=7 gid=8 pid=9" {
		t.Errorf("identity round trip: %v %v", got, ok)
	}
}
