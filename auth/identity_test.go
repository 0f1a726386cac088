package auth

import (
	"math"
	"testing"
)

func TestUnixIdentityString(t *testing.T) {
	for _, tc := range []struct {
		id   Identity
		want string
	}{
		{Identity{Kind: "unix"}, "uid=0 gid=0 pid=0"},
		{Identity{Kind: "unix", UID: 1000, GID: 100, PID: 4242}, "uid=1000 gid=100 pid=4242"},
		{Identity{Kind: "unix", UID: math.MaxUint32, GID: math.MaxUint32, PID: math.MinInt32}, "uid=4294967295 gid=4294967295 pid=-2147483648"},
		{Identity{Kind: "anonymous"}, "anonymous"},
	} {
		if got := tc.id.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.id, got, tc.want)
		}
	}
	id := Identity{Kind: "unix", UID: 1000, GID: 100, PID: 4242}
	if n := testing.AllocsPerRun(100, func() { _ = id.String() }); n != 1 {
		t.Errorf("String allocates %v times, want once (the string)", n)
	}
}
